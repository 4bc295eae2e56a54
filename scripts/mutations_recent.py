"""Mutation-gate entries (the format of ``scripts/mutations.py``), kept beside it so each file stays
under 800 lines: the classes fixed last (issue 33 and after)."""

# ruff: noqa: E501  (patterns are verbatim source lines)

MUTATIONS = [
    dict(
        id='emu-barrier-no-restart',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='''    bar_gen++;
    restart_round = 1;''',
        replacement='''    bar_gen++;
    restart_round = 0;''',
        tests=['tests/emulator/test_mutation_kills_emulator.py', 'tests/emulator/test_emulator_kernels.py'],
        why='after a barrier the next phase continues mid-order (in-order is not in order)',
    ),
    dict(
        id='emu-fiber-stack-guard-dropped',
        file='mpslinalg/emulator/shim/cpu_runtime.c',
        pattern='for (int i = 0; i < MAXT; i++) mprotect(p + i * slot, page, PROT_NONE);',
        replacement='/* no guard pages below fiber stacks */',
        tests=['tests/emulator/test_mutation_kills_emulator.py', 'tests/emulator/test_emulator_faults.py'],
        why="a fiber's stack overflow silently corrupts its neighbour",
    ),
    dict(
        id='emu-buffer-upper-guard-dropped',
        file='mpslinalg/emulator/_cpu.py',
        pattern='''        for region in (self.low, self.guard):
            if _libc.mprotect(region, self.GUARD, 0) != 0:''',
        replacement='''        for region in (self.low,):
            if _libc.mprotect(region, self.GUARD, 0) != 0:''',
        tests=['tests/emulator/test_emulator_faults.py'],
        why='guard=True no longer protects the page after a buffer',
    ),
    # ---- issue 33 (non-SVD): the classes fixed there, each kept caught ------------------------------
    dict(
        id='routing-enabled-exit-restores-oldest',
        file='mpslinalg/routing.py',
        pattern='_apply(_open[-1][0] if _open else _before_open)',
        replacement='_apply(_before_open)',
        tests=['tests/test_routing_threads.py', 'tests/test_routing.py::test_enabled_context_restores_previous_routing'],
        why="an inner enabled() block's exit drops the outer block's routing",
    ),
    dict(
        id='triangular-fast-path-dtype-mix',
        file='mpslinalg/triangular/api.py',
        pattern='            if B.dtype is A.dtype:',
        replacement='            if True:',
        tests=['tests/oplayer/test_torch_contract.py'],
        why="issue 33 item 1: the torch-first path inherits torch's silent cast of a complex B",
    ),
    dict(
        id='lu-det-jvp-conj-dropped',
        file='mpslinalg/lu/ops.py',
        pattern='return (adj_h.conj() * dA).sum((-2, -1)), torch.zeros_like(LU_t), None',
        replacement='return (adj_h * dA).sum((-2, -1)), torch.zeros_like(LU_t), None',
        tests=['tests/lu/test_det_forward_mode.py'],
        why="det's tangent contracts adj(A)^H instead of adj(A)^T (complex)",
    ),
    dict(
        id='lu-det-dual-takes-torch-path',
        file='mpslinalg/lu/api.py',
        pattern='and _fwad._current_level < 0 and not _torch.unsafe(A)',
        replacement='and not _torch.unsafe(A)',
        tests=['tests/lu/test_det_forward_mode.py'],
        why="issue 33 item 2: a dual A goes to torch.linalg.det, whose tangent is 0 at singular matrices",
    ),
    dict(
        id='oplayer-backward-not-internal',
        file='mpslinalg/oplayer/op.py',
        pattern='        local.inside = True\n',
        replacement='        local.inside = before\n',
        tests=['tests/test_routing_backward_once.py'],
        why="issue 33 'Also': a backward's torch.linalg calls re-enter our front doors under when='always'",
    ),
    dict(
        id='lu-torch-race-guard-off',
        file='mpslinalg/lu/torch_cpu.py',
        pattern='return n >= MIN_COLUMNS and m > 0',
        replacement='return n >= 1 << 30 and m > 0',
        tests=['tests/lu/test_torch_cpu_race.py'],
        why="torch's CPU batched getrf races at >1 thread (pytorch#142815): wrong inverses, solves, dets",
    ),
]

/// Part `p` (0 ..< `parts`, `parts` at least 1) of `count` items cut into `parts` runs of
/// consecutive items, in order: every item is in exactly one run, the runs' sizes differ by at
/// most one (the later runs the larger), and with fewer items than parts some runs are empty.
/// How work is split between threads (a window classifier's consecutive steps, the blocks of a
/// stateless prefix, a batched step's channels), each thread's share known without a table.
package func partRange(_ p: Int, of parts: Int, count: Int) -> Range<Int> {
    (p * count / parts)..<((p + 1) * count / parts)
}

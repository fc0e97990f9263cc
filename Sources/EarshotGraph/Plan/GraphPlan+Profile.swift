import Foundation

/// Where a step's time goes: each compiled step timed on its own (`earshot bench model --profile`).
extension GraphPlan {
    /// One step of the plan and its time.
    public struct StepTime: Sendable {
        /// The step's place in the run, from 0.
        public let index: Int
        /// What it runs: its kind and sizes (`Step.summary`).
        public let summary: String
        /// The median over the runs of its seconds for one stream: the thread's CPU time, so that
        /// a step is not charged for the time the thread waited for a core on a busy machine.
        public let seconds: Double
    }

    /// Runs one stream `runs` times (after one run to warm up), `load(input, buffer)` filling each
    /// input before every run, and times every step (the thread's CPU time): each step's median.
    public func profile(runs: Int, workspace ws: inout GraphWorkspace,
                        load: (_ input: Int, UnsafeMutableBufferPointer<Float>) -> Void) throws(GraphError) -> [StepTime] {
        func cpuSeconds() -> Double {
            var t = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
            return Double(t.tv_sec) + Double(t.tv_nsec) * 1e-9
        }
        var times = [[Double]](repeating: [], count: steps.count)
        for run in 0...max(runs, 1) {
            try self.run(count: 1, workspace: &ws) { arena, context throws(GraphError) in
                for (i, ref) in inputRefs.enumerated() { Self.asFloats(arena(0, ref), coded: ref.coded) { load(i, $0) } }
                let c = context(0, 1)
                for (k, runner) in unretained.enumerated() {
                    let start = cpuSeconds()
                    if let failure = runner._withUnsafeGuaranteedRef({ $0.run(c) }) { throw failure }
                    if run > 0 { times[k].append(cpuSeconds() - start) }
                }
            }
        }
        return steps.indices.map { k in
            StepTime(index: k, summary: steps[k].summary, seconds: times[k].sorted()[times[k].count / 2])
        }
    }
}

extension Step {
    /// The step's kind and the sizes it reads and writes, for a profile.
    var summary: String {
        "\(type(of: self)): \(reads.map { String($0.count) }.joined(separator: ", ")) -> \(writes.map { String($0.count) }.joined(separator: ", "))"
            + (products > 0 ? ", \(products) multiply-adds" : "")
    }
}

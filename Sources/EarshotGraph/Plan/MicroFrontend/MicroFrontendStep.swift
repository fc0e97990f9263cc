/// The compiled step of `MicroFrontend`.
struct MicroFrontendStep: Step {
    var samples, noise, pending, started: GraphPlan.Ref
    var features, noiseOut, pendingOut, startedOut: GraphPlan.Ref

    var reads: [GraphPlan.Ref] { [samples, noise, pending, started] }
    var writes: [GraphPlan.Ref] { [features, noiseOut, pendingOut, startedOut] }

    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        (moved.samples, moved.noise, moved.pending, moved.started) = (move(samples), move(noise), move(pending), move(started))
        (moved.features, moved.noiseOut, moved.pendingOut, moved.startedOut) = (move(features), move(noiseOut), move(pendingOut), move(startedOut))
        return moved
    }

    func run(_ c: Context) {
        // Streams that have all started, eight or more: computed together, one per vector lane.
        if c.streams >= 8, (0..<c.streams).allSatisfy({ c.read(started, $0)[0] != 0 }) {
            MicroFrontendOp.steps(count: samples.count, scratch: UnsafeMutableRawPointer(c.scratch), streams: c.streams) { b in
                (c.read(samples, b), c.read(noise, b), c.read(pending, b), c.write(features, b), c.write(noiseOut, b),
                 c.write(pendingOut, b), c.write(startedOut, b))
            }
            return
        }
        for b in 0..<c.streams {
            MicroFrontendOp.step(samples: c.read(samples, b), count: samples.count, noise: c.read(noise, b), pending: c.read(pending, b),
                                 started: c.read(started, b)[0], features: c.write(features, b), noiseOut: c.write(noiseOut, b),
                                 pendingOut: c.write(pendingOut, b), startedOut: c.write(startedOut, b))
        }
    }
}

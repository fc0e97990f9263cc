import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotGraph
@testable import EarshotModel

/// What the builder makes of microWakeWord's int8 graphs (the bundled packages): their outputs
/// are checked against TFLite elsewhere; here, that the copies those graphs are full of are not
/// run when they need not be.
@Suite("Compiled int8 plans of the bundled wake-word models")
struct QuantizedPlanTests {
    static let models = ["okay-nabu", "hey-jarvis", "alexa", "hey-mycroft"]

    static func plan(_ name: String) throws -> GraphPlan {
        let model = try Model(contentsOf: Repo.root.appendingPathComponent("Models/\(name)"))
        return try #require(model.graph?.plan, "\(name) runs compiled")
    }

    @Test("No copy copies what another copy wrote: each channel split (a copy of the stream's concatenated window) is read in place by its depthwise convolutions",
          arguments: models)
    func splitsReadInPlace(_ name: String) throws {
        let plan = try Self.plan(name)
        let depthwise = plan.steps.filter { ($0 as? QuantizedProductStep)?.channelTaps == true }
        #expect(depthwise.count >= 4, "\(name) has \(depthwise.count) depthwise convolutions")
        for (k, step) in plan.steps.enumerated() {
            guard let move = step as? MoveStep else { continue }
            for source in move.sources {
                let writer = plan.steps[..<k].lastIndex { $0.writes.contains { $0.overlaps(source) } }
                #expect(writer.map { !(plan.steps[$0] is MoveStep) } ?? true, "\(name): the copy at step \(k) copies step \(writer ?? -1)'s copy")
            }
        }
    }

    @Test("Every value a copy writes is read by a later step or is an output of the plan", arguments: models)
    func noUnreadCopies(_ name: String) throws {
        let plan = try Self.plan(name)
        for (k, step) in plan.steps.enumerated() {
            guard let move = step as? MoveStep else { continue }
            for out in move.outputs {
                let read = plan.outputRefs.contains { $0.overlaps(out) } || plan.steps[(k + 1)...].contains { $0.reads.contains { $0.overlaps(out) } }
                #expect(read, "\(name): step \(k) writes \(out.count) values nothing reads")
            }
        }
    }

    @Test("Every depthwise convolution has its weights in pairs of taps and its offset folded, so that on VNNI it runs two taps an instruction",
          arguments: models)
    func depthwiseInPairs(_ name: String) throws {
        let plan = try Self.plan(name)
        let depthwise = plan.steps.compactMap { $0 as? QuantizedProductStep }.filter(\.channelTaps)
        #expect(depthwise.count >= 4)
        for step in depthwise {
            let blocks = (step.groups + 31) / 32
            #expect(step.depthPairs.count == (step.k + 1) / 2 * blocks * 64, "\(name): k \(step.k), \(step.groups) channels")
            #expect(step.depthBase.count == blocks * 32)
        }
    }
}

import Dispatch
import EarshotFeatures

/// `body(i)` for i in 0..<count on every core; the results in order.
package func parallelMap<T: Sendable>(_ count: Int, _ body: @Sendable (Int) -> T) -> [T] {
    let slots = ResultSlots<T>(count)
    DispatchQueue.concurrentPerform(iterations: count) { i in slots.set(i, body(i)) }
    return slots.values()
}

/// The results of a parallel loop. `@unchecked Sendable`: iteration i writes slot i only (its
/// own memory, no shared array), and the values are read after the loop has returned.
final class ResultSlots<T>: @unchecked Sendable {
    private let slots: UnsafeMutableBufferPointer<T?>
    init(_ count: Int) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: nil)
    }
    deinit {
        _ = slots.deinitialize()
        slots.deallocate()
    }
    func set(_ i: Int, _ value: T) { slots[i] = value }
    func values() -> [T] { slots.map { $0! } }  // every slot was set by its iteration
}

/// A window of blocks through the stateless prefix.
struct Prepared: Sendable {
    var x: Activations
    var inputProducts: [Float]?
}

/// The windows of a long run, each prepared once, in order of claim, by a helper thread or by
/// the thread taking them (when the window it needs is not ready, it prepares the next
/// unclaimed one instead of waiting). At most `lookahead` windows are claimed and not yet taken.
final class WindowPipeline<Value: Sendable>: Sendable {
    private let prepare: @Sendable (Int) -> Result<Value, ModelError>
    private let count: Int
    private struct Claims {
        /// The next window nobody has claimed.
        var next = 0
        /// Windows taken so far.
        var taken = 0
        /// No more claims; the helper ends.
        var stopped = false
        /// The helper has begun (so `stop` must wake it and wait for it).
        var helperStarted = false
    }
    private let claims = Locked(Claims())
    private let results: Locked<[Result<Value, ModelError>?]>
    private let ready: [DispatchSemaphore]
    /// Windows that may still be claimed before one is taken.
    private let room: DispatchSemaphore
    private let helperDone = DispatchSemaphore(value: 0)
    static var lookahead: Int { 3 }

    init(count: Int, prepare: @escaping @Sendable (Int) -> Result<Value, ModelError>) {
        self.prepare = prepare
        self.count = count
        results = Locked(Array(repeating: nil, count: count))
        ready = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        room = DispatchSemaphore(value: Self.lookahead)
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            // Stopped before it began (the taking thread did every window): nothing to do.
            let begins = claims.withLock { c in
                c.helperStarted = !c.stopped
                return c.helperStarted
            }
            guard begins else { return }
            while true {
                room.wait()
                guard let w = claim() else { break }
                run(w)
            }
            helperDone.signal()
        }
    }

    func claim() -> Int? {
        claims.withLock { c in
            guard !c.stopped, c.next < count else { return nil }
            c.next += 1
            return c.next - 1
        }
    }

    func run(_ w: Int) {
        let result = prepare(w)
        results.withLock { $0[w] = result }
        ready[w].signal()
    }

    /// Window w's preparation (windows are taken in order).
    func take(_ w: Int) -> Result<Value, ModelError> {
        // Not ready: prepare what nobody has claimed yet, while there is room.
        while results.withLock({ $0[w] == nil }), room.wait(timeout: .now()) == .success {
            guard let next = claim() else {
                room.signal()
                break
            }
            run(next)
        }
        ready[w].wait()
        room.signal()
        claims.withLock { $0.taken += 1 }
        let result = results.withLock { r in
            defer { r[w] = nil }
            return r[w]
        }
        return result ?? .failure(.layer(path: "", layer: "frontEnd", reason: "window \(w) has no result"))
    }

    /// Stops the helper: no more windows are claimed. Waits for a helper that has begun (it
    /// may be preparing a window); one that has not will end as soon as it begins. Gives back
    /// the room of windows claimed and never taken (a run that failed part way), so the
    /// semaphore ends where it started.
    func stop() {
        let started = claims.withLock { c in
            c.stopped = true
            return c.helperStarted
        }
        if started {
            room.signal()  // a helper waiting for room wakes, finds the run stopped and ends
            helperDone.wait()
        }
        let outstanding = claims.withLock { $0.next - $0.taken }
        for _ in 0..<max(0, outstanding) { room.signal() }
    }
}

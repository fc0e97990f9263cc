import Dispatch
import Foundation
import Synchronization

/// A thread of its own for a service's side loop (the metrics endpoint, the mDNS responder):
/// started once, asked to stop from any thread, and `stop` returns once its loop has ended. The
/// loop checks `isStopping` at least every poll timeout.
public final class ServiceThread: Sendable {
    private let started = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private let ended = DispatchSemaphore(value: 0)

    public init() {}

    /// Whether `stop` was called.
    public var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Runs `loop` on a new thread named `name` (once; later calls do nothing).
    public func start(name: String, _ loop: @escaping @Sendable () -> Void) {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let ended = self.ended
        let thread = Thread {
            loop()
            ended.signal()
        }
        thread.name = name
        thread.start()
    }

    /// Asks the loop to stop and waits for it to end (at once when it never started).
    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed), started.load(ordering: .relaxed) else { return }
        ended.wait()
    }
}

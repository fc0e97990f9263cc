import Dispatch

/// A value computed on another thread from the moment this is made (a model's weights hashed, a
/// plan's reference run) while the caller goes on; `value()` waits for it.
package final class Background<Value: Sendable>: Sendable {
    private let body: @Sendable () -> Value
    private let result = Locked<Value?>(nil)
    private let done = DispatchSemaphore(value: 0)

    package init(_ body: @escaping @Sendable () -> Value) {
        self.body = body
        DispatchQueue.global().async { [result, done] in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
    }

    /// The value, once computed.
    package func value() -> Value {
        done.wait()
        done.signal()  // for any later call
        // Set before the signal; computed here only if it were not.
        return result.withLock { $0 } ?? body()
    }
}

import Foundation

/// A value behind a lock: what the package's pools, buffers and caches share between threads.
/// The lock is a pthread mutex (through `NSLock`), which ThreadSanitizer understands, so that a
/// sanitizer run checks the code that uses it instead of reporting the lock itself.
/// `@unchecked Sendable`: `value` is only read or written inside `withLock`, while `lock` is held.
package final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    package init(_ value: Value) { self.value = value }

    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

import EarshotJSON
import Foundation

/// How much a log line matters.
public enum LogLevel: String, Sendable {
    case info, warning, error
}

/// One line of a service's log: what happened, and about what (`client`, `source`, `model`...).
/// As text (`description`) it reads as before: the client first, then the message; as JSON
/// (`json`) it is one object a line for journald or Loki.
public struct LogRecord: Sendable, CustomStringConvertible {
    public var level: LogLevel
    public var message: String
    /// Named values, in order (a client's address, a source's id, a model's name).
    public var fields: [(name: String, value: String)]

    public init(_ message: String, level: LogLevel = .info, _ fields: [(name: String, value: String)] = []) {
        self.message = message
        self.level = level
        self.fields = fields
    }

    /// The line as a person reads it: "CLIENT: message" when a client is named.
    public var description: String {
        if let client = fields.first(where: { $0.name == "client" }) { return "\(client.value): \(message)" }
        return message
    }

    /// One JSON object: `time` (RFC 3339, UTC, milliseconds), `level`, `message`, then `context`'s
    /// fields and the record's.
    public func json(time: Date = Date(), context: [(name: String, value: String)] = []) -> String {
        var out = "{\"time\":" + JSONText.quoted(Self.timestamp(time)) + ",\"level\":" + JSONText.quoted(level.rawValue)
            + ",\"message\":" + JSONText.quoted(message)
        for (name, value) in context + fields { out += "," + JSONText.quoted(name) + ":" + JSONText.quoted(value) }
        return out + "}"
    }

    /// RFC 3339 in UTC to the millisecond: 2026-12-06T07:30:00.123Z.
    static func timestamp(_ date: Date) -> String {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(ms % 1000))
    }
}

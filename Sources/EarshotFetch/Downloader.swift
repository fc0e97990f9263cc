import Foundation

/// Downloads with the system's `curl`, run as a process with a fixed argument list (no shell):
/// only `earshot models fetch` needs the network, so the binary links no HTTP or TLS library
/// and the Debian package only recommends curl. curl's output is read here through a pipe,
/// hashed and counted as it comes, and the transfer is stopped once it passes its bound.
/// curl honours the usual proxy variables (`https_proxy`, `no_proxy`); `-q` keeps a user's
/// `.curlrc` out of it.
public struct Downloader: Sendable {
    /// The curl to run; nil: the first on `PATH`.
    public var curl: String?
    /// The environment whose `PATH` is searched.
    public var environment: [String: String]
    /// Seconds to wait for a connection.
    public var connectTimeout = 30
    /// A transfer slower than 1 kB/s for this many seconds is given up.
    public var stallSeconds = 60

    public init(curl: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.curl = curl
        self.environment = environment
    }

    /// What a download brought: its size and SHA-256 (lowercase hex).
    public struct Fetched: Sendable, Equatable {
        public var bytes: Int
        public var sha256: String

        public init(bytes: Int, sha256: String) {
            self.bytes = bytes
            self.sha256 = sha256
        }
    }

    /// Fetches `url` (https, http or file) into `file` (created or emptied), at most `maxBytes`
    /// bytes: beyond them the transfer is stopped and `.tooLarge` thrown. An HTTP error, a
    /// server that cannot be reached or no curl to run: `.download` with the reason (curl's
    /// own message). On failure `file` may hold part of the bytes: the caller removes it.
    public func fetch(_ url: String, to file: URL, maxBytes: Int) throws(FetchError) -> Fetched {
        guard ["https://", "http://", "file://"].contains(where: { url.lowercased().hasPrefix($0) }) else {
            throw .download(url: url, reason: "not an https, http or file URL")
        }
        let program = try curlPath(for: url)
        let fd = open(file.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .cannotWrite(path: file.path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = ["-q", "--silent", "--show-error", "--fail", "--location", "--max-redirs", "5",
                             "--proto", "=https,http,file", "--proto-redir", "=https,http",
                             "--connect-timeout", "\(connectTimeout)", "--speed-limit", "1024", "--speed-time", "\(stallSeconds)",
                             "--retry", "2", "--max-filesize", "\(maxBytes)", url]
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch {
            throw .download(url: url, reason: "cannot run \(program): \(error.localizedDescription)")
        }
        let reading = out.fileHandleForReading.fileDescriptor
        var hash = SHA256()
        var total = 0
        var failure: FetchError?
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while failure == nil {
            let n = buffer.withUnsafeMutableBytes { read(reading, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { failure = .download(url: url, reason: "reading curl's output: \(String(cString: strerror(errno)))"); break }
            if n == 0 { break }
            total += n
            if total > maxBytes { failure = .tooLarge(url: url, limit: maxBytes); break }
            buffer.withUnsafeBufferPointer { hash.update(UnsafeBufferPointer(rebasing: $0[0..<n])) }
            if !writeAll(fd, buffer, count: n) { failure = .cannotWrite(path: file.path, reason: String(cString: strerror(errno))) }
        }
        if failure != nil && process.isRunning { process.terminate() }
        try? out.fileHandleForReading.close()
        let message = String(decoding: (try? err.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
        process.waitUntilExit()
        if let failure { throw failure }
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            if process.terminationReason == .exit && process.terminationStatus == 63 { throw .tooLarge(url: url, limit: maxBytes) }
            throw .download(url: url, reason: Self.reason(message, status: process.terminationStatus, signalled: process.terminationReason != .exit))
        }
        return Fetched(bytes: total, sha256: hash.finalizeHex())
    }

    /// curl's message without its prefix (`curl: (7) Failed to connect ...`).
    static func reason(_ message: String, status: Int32, signalled: Bool) -> String {
        if signalled { return "curl was stopped by signal \(status)" }
        var line = message.split(separator: "\n").last.map(String.init) ?? ""
        if line.hasPrefix("curl: ("), let close = line.firstIndex(of: ")") {
            line = String(line[line.index(after: close)...]).trimmingCharacters(in: .whitespaces)
        }
        return line.isEmpty ? "curl exited with status \(status)" : line
    }

    /// The curl to run, or why there is none.
    func curlPath(for url: String) throws(FetchError) -> String {
        if let curl { return curl }
        for folder in (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") where !folder.isEmpty {
            let path = String(folder) + "/curl"
            if access(path, X_OK) == 0 { return path }
        }
        throw .download(url: url, reason: "no curl on PATH to download with (Debian: apt install curl)")
    }
}

/// Writes `count` bytes of `buffer` to `fd`, through interruptions; false on a failed write.
private func writeAll(_ fd: Int32, _ buffer: [UInt8], count: Int) -> Bool {
    var done = 0
    while done < count {
        let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + done, count - done) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return false }
        done += n
    }
    return true
}

import Foundation

/// A write that failed: the path (or "standard output") and the system's reason. Exit 74
/// (EX_IOERR); when the output file could not even be created, 73 (EX_CANTCREAT).
struct OutputError: Error, CustomStringConvertible {
    let path: String
    let reason: String
    var cannotCreate = false
    var description: String { "\(path): cannot \(cannotCreate ? "create" : "write"): \(reason)" }
    var exitCode: Int32 { cannotCreate ? 73 : 74 }
}

/// Where a command's results go: standard output, or a file written atomically (a temporary
/// file in the same folder, renamed over the path only by `commit()`, so that a run that fails,
/// or is stopped, leaves whatever was there before untouched). Every write is checked: a full
/// disk, a closed pipe or a lost mount is an `OutputError` naming the path.
///
/// `@unchecked Sendable`: the buffer and descriptor are guarded by `lock`; commands write from
/// one task at a time, the lock makes a stray second writer safe.
final class OutputFile: @unchecked Sendable {
    let path: String
    private let fd: Int32
    private let temporary: String?
    private var buffer: [UInt8] = []
    private var failure: OutputError?
    private var committed = false
    private let lock = NSLock()
    /// Bytes gathered before they go to the descriptor (stdout on a terminal goes out at once).
    private let flushAt: Int

    static let standardOutput = OutputFile()

    private init() {
        path = "standard output"
        fd = STDOUT_FILENO
        temporary = nil
        flushAt = isatty(STDOUT_FILENO) != 0 ? 0 : 1 << 16
    }

    /// `path` nil or "-": standard output. Otherwise a temporary file beside `path`.
    static func open(_ path: String?) throws(OutputError) -> OutputFile {
        guard let path, path != "-" else { return standardOutput }
        return try OutputFile(file: path)
    }

    private init(file path: String) throws(OutputError) {
        self.path = path
        let url = URL(fileURLWithPath: path)
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            throw OutputError(path: path, reason: "it is a folder", cannotCreate: true)
        }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
            // A device, a FIFO or a socket (/dev/stdout, a named pipe): written in place.
            let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { throw OutputError(path: path, reason: String(cString: strerror(errno)), cannotCreate: true) }
            self.fd = fd
            temporary = nil
            flushAt = 1 << 16
            return
        }
        let folder = url.deletingLastPathComponent().path
        var template = Array((folder + "/." + url.lastPathComponent + ".XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw OutputError(path: path, reason: String(cString: strerror(errno)), cannotCreate: true) }
        self.fd = fd
        temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        flushAt = 1 << 16
        // The new file gets the usual permissions (mkstemp makes it 0600).
        let mask = umask(0)
        umask(mask)
        fchmod(fd, 0o666 & ~mask)
    }

    deinit {
        guard fd != STDOUT_FILENO, !committed else { return }
        close(fd)
        if let temporary { unlink(temporary) }
    }

    /// Appends a line (a newline is added).
    func write(_ line: String) throws(OutputError) {
        try write(text: line + "\n")
    }

    /// Appends bytes as they are (a binary file).
    func write(bytes: [UInt8]) throws(OutputError) {
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        buffer += bytes
        if buffer.count > flushAt { try flushLocked() }
    }

    func write(text: String) throws(OutputError) {
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        buffer += Array(text.utf8)
        if buffer.count > flushAt { try flushLocked() }
    }

    /// Sends what is buffered to the descriptor.
    func flush() throws(OutputError) {
        lock.lock()
        defer { lock.unlock() }
        try flushLocked()
    }

    private func flushLocked() throws(OutputError) {
        if let failure { throw failure }
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                let error = OutputError(path: path, reason: String(cString: strerror(errno)))
                failure = error
                buffer.removeAll()
                throw error
            }
            done += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, and for a file: syncs it to disk and renames it over `path`. Until this is called
    /// nothing at `path` changes.
    func commit() throws(OutputError) {
        try flush()
        guard fd != STDOUT_FILENO, !committed else { return }
        if temporary != nil, fsync(fd) != 0 { throw OutputError(path: path, reason: String(cString: strerror(errno))) }
        if close(fd) != 0 { throw OutputError(path: path, reason: String(cString: strerror(errno))) }
        committed = true
        guard let temporary else { return }
        if rename(temporary, path) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw OutputError(path: path, reason: reason)
        }
    }
}

/// Writes a command's result text to standard output, checked (see `OutputFile`).
func out(_ text: String = "", terminator: String = "\n") throws(OutputError) {
    try OutputFile.standardOutput.write(text: text + terminator)
}

/// Identifies a file by device and inode, so that two paths to one file are seen as one.
struct FileIdentity: Hashable {
    let device: UInt64
    let inode: UInt64
    let isFolder: Bool

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        isFolder = info.st_mode & S_IFMT == S_IFDIR
    }
}

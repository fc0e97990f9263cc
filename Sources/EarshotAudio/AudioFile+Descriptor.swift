import CSndFile
import Foundation

/// The layout of headerless PCM: what a raw stream cannot say about itself.
public struct RawPCMFormat: Sendable, Equatable {
    /// The samples' encoding (little-endian).
    public enum Encoding: String, Sendable, CaseIterable {
        case s16, s32, float
    }

    /// Hz.
    public var sampleRate: Int
    /// Interleaved channels.
    public var channelCount: Int
    /// The samples' encoding.
    public var encoding: Encoding

    public init(sampleRate: Int, channelCount: Int = 1, encoding: Encoding = .s16) {
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.encoding = encoding
    }
}

extension AudioFile {
    /// The most bytes of standard input held in a temporary file for a format that cannot be
    /// read from a pipe (FLAC, CAF, MP3, ...): 1 GiB. Formats read as they arrive need none.
    public static let spoolLimitBytes = 1 << 30

    /// Opens audio arriving on a descriptor (standard input by default), reading it as it arrives
    /// where the format allows: raw PCM (`raw`), WAV, AIFF, AU, W64 and Ogg (Vorbis, Opus) pass
    /// from the descriptor to libsndfile through a pipe as they come, in memory bounded by the
    /// pipe. A regular file (`< file.flac`) is read in place. Any other format needs seeking, so
    /// the stream is first copied into an unnamed temporary file in `temporaryFolder` (made with
    /// `O_TMPFILE`, or unlinked as soon as it is made where that is not supported): nothing is
    /// left behind however the process ends. That file holds at most `spoolLimit` bytes.
    ///
    /// The descriptor is left open; its data is read from another thread until its end (or until
    /// this reader is released).
    /// - Throws: `AudioError.empty` when the stream holds nothing, `.tooLarge` past
    ///   `spoolLimit`, `.cannotOpen` when the temporary file cannot be made or written, and what
    ///   `init(path:)` throws for the audio itself; every error names the stream as `name`.
    public convenience init(descriptor: Int32 = STDIN_FILENO, name: String = "-", raw: RawPCMFormat? = nil,
                            spoolLimit: Int = AudioFile.spoolLimitBytes,
                            temporaryFolder: String = FileManager.default.temporaryDirectory.path) throws(AudioError) {
        let own = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)  // a copy of our own, not inherited by processes started meanwhile
        guard own >= 0 else { throw .cannotOpen(path: name, reason: String(cString: strerror(errno))) }
        var status = stat()
        let regular = fstat(own, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
        if let raw {
            var info = SF_INFO()
            info.samplerate = Int32(clamping: raw.sampleRate)
            info.channels = Int32(clamping: raw.channelCount)
            let encoding: Int32 = switch raw.encoding {
            case .s16: Int32(SF_FORMAT_PCM_16)
            case .s32: Int32(SF_FORMAT_PCM_32)
            case .float: Int32(SF_FORMAT_FLOAT)
            }
            info.format = Int32(SF_FORMAT_RAW) | encoding | Int32(SF_ENDIAN_LITTLE)
            guard sf_format_check(&info) != 0, raw.sampleRate > 0, raw.channelCount > 0 else {
                close(own)
                throw .malformed(path: name, reason: "raw PCM of \(raw.channelCount) channels at \(raw.sampleRate) Hz is not a layout libsndfile reads")
            }
            try self.init(name: name, info: info) { info in sf_open_fd(own, Int32(SFM_READ), &info, 1) }
            return
        }
        if regular {
            try self.init(name: name) { info in sf_open_fd(own, Int32(SFM_READ), &info, 1) }
            return
        }
        // A pipe, a socket or a terminal: what the stream is decides how it is read.
        let head: [UInt8]
        do { head = try AudioFile.readFully(own, count: 16, name: name) } catch {
            close(own)
            throw error
        }
        guard !head.isEmpty else {
            close(own)
            throw .empty(path: name)
        }
        if AudioFile.readsFromPipe(head) {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else {
                close(own)
                throw .cannotOpen(path: name, reason: String(cString: strerror(errno)))
            }
            _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
            let (from, to) = (own, ends[1])
            Thread { AudioFile.relay(head, from: from, to: to) }.start()
            try self.init(name: name) { info in sf_open_fd(ends[0], Int32(SFM_READ), &info, 1) }
            return
        }
        let spooled: Int32
        do { spooled = try AudioFile.spool(head, from: own, name: name, limit: spoolLimit, folder: temporaryFolder) } catch {
            close(own)
            throw error
        }
        close(own)
        try self.init(name: name) { info in sf_open_fd(spooled, Int32(SFM_READ), &info, 1) }
    }

    /// The containers libsndfile reads from a pipe whole and in order (each tried: FLAC fails,
    /// CAF reads nothing, RF64 loses its last frames, so those are held in a file first).
    static func readsFromPipe(_ head: [UInt8]) -> Bool {
        func tag(_ at: Int, _ text: String) -> Bool {
            let bytes = Array(text.utf8)
            return head.count >= at + bytes.count && Array(head[at..<(at + bytes.count)]) == bytes
        }
        return ((tag(0, "RIFF") || tag(0, "RIFX")) && tag(8, "WAVE"))
            || (tag(0, "FORM") && (tag(8, "AIFF") || tag(8, "AIFC")))
            || tag(0, ".snd") || tag(0, "dns.")
            || tag(0, "OggS")
            || head.starts(with: [0x72, 0x69, 0x66, 0x66, 0x2E, 0x91, 0xCF, 0x11, 0xA5, 0xD6, 0x28, 0xDB, 0x04, 0xC1, 0x00, 0x00])  // W64's RIFF GUID
    }

    /// Up to `count` bytes, fewer only at the stream's end.
    static func readFully(_ fd: Int32, count: Int, name: String) throws(AudioError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw .cannotOpen(path: name, reason: String(cString: strerror(errno))) }
            if n == 0 { break }
            got += n
        }
        return Array(bytes[0..<got])
    }

    /// Writes `head`, then everything from `from`, into the pipe `to`; closes both at the end, or
    /// as soon as the reader has gone (its pipe closed: the write fails, with SIGPIPE blocked on
    /// this thread and its pending signal taken back).
    static func relay(_ head: [UInt8], from: Int32, to: Int32) {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
        defer {
            close(from)
            close(to)
            var none = timespec()
            while sigtimedwait(&pipeSignal, nil, &none) == SIGPIPE {}
        }
        guard writeAll(head, to: to) else { return }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            guard writeAll(buffer[0..<n], to: to) else { return }
        }
    }

    /// Every byte written, or false.
    static func writeAll(_ bytes: some Collection<UInt8>, to fd: Int32) -> Bool {
        Array(bytes).withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                done += n
            }
            return true
        }
    }

    /// `head` and the rest of `fd` in an unnamed temporary file (at most `limit` bytes), its
    /// descriptor at the start.
    static func spool(_ head: [UInt8], from fd: Int32, name: String, limit: Int, folder: String) throws(AudioError) -> Int32 {
        let file = try unnamedFile(in: folder, name: name)
        func fail(_ reason: String) -> AudioError {
            close(file)
            return .cannotOpen(path: name, reason: "holding it in a temporary file in \(folder): \(reason)")
        }
        guard writeAll(head, to: file) else { throw fail(String(cString: strerror(errno))) }
        var total = head.count
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw fail("reading: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            total += n
            guard total <= limit else {
                close(file)
                throw .tooLarge(path: name, limitBytes: limit,
                                reason: "a format that cannot be read from a pipe is held in a temporary file first")
            }
            guard writeAll(buffer[0..<n], to: file) else { throw fail(String(cString: strerror(errno))) }
        }
        guard lseek(file, 0, SEEK_SET) == 0 else { throw fail(String(cString: strerror(errno))) }
        return file
    }

    /// A temporary file without a name: `O_TMPFILE` where the kernel and file system allow it,
    /// else `earshot-stdin-PID-XXXXXX` unlinked the moment it is made.
    static func unnamedFile(in folder: String, name: String) throws(AudioError) -> Int32 {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
        let tmpfile: Int32 = 0o20000000 | O_DIRECTORY  // O_TMPFILE (asm-generic), which Glibc's module does not export
        let fd = open(folder, tmpfile | O_RDWR | O_CLOEXEC, 0o600)
        if fd >= 0 { return fd }
        #endif
        var template = Array("\(folder)/earshot-stdin-\(getpid())-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard made >= 0 else {
            throw .cannotOpen(path: name, reason: "cannot make a temporary file in \(folder): \(String(cString: strerror(errno)))")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        _ = fcntl(made, F_SETFD, FD_CLOEXEC)
        return made
    }
}

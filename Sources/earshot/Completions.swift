/// Shell completions and the manual page, written from the commands' declarations (`Specs`).
enum Completions {
    static func run(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.completions)
        guard args.positionals.count == 1, let shell = args.positionals.first else {
            throw UsageError("completions takes one shell: bash, zsh or fish", hint: "earshot completions bash")
        }
        switch shell {
        case "bash": try out(bash())
        case "zsh": try out(zsh())
        case "fish": try out(fish())
        default:
            throw UsageError("completions \(shell): expected bash, zsh or fish",
                             hint: closest(shell, in: ["bash", "zsh", "fish"]).map { "did you mean \($0)?" })
        }
    }

    /// Each command's option words, by its name (`bench serve` as one).
    static func optionWords(_ spec: CommandSpec) -> [String] {
        spec.options.flatMap { o in ["--\(o.name)"] + (o.short.map { ["-\($0)"] } ?? []) } + ["--help"]
    }

    /// The words after `earshot models` that name a command of their own (info, fetch).
    static var modelsSubcommands: [String] {
        Specs.all.compactMap { $0.name.hasPrefix("models ") ? String($0.name.dropFirst(7)) : nil }
    }

    static func bash() -> String {
        var cases: [String] = []
        for spec in Specs.all {
            cases.append("    \"\(spec.name)\") opts=\"\(optionWords(spec).joined(separator: " "))\" ;;")
        }
        let top = Specs.commands.joined(separator: " ")
        return """
            # earshot completions for bash: earshot completions bash > /etc/bash_completion.d/earshot
            _earshot() {
              local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} opts=""
              if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "\(top) --version --help" -- "$cur")); return; fi
              if [ "$cmd" = bench ] && [ "$COMP_CWORD" -eq 2 ]; then COMPREPLY=($(compgen -W "\(Specs.benchSubjects.joined(separator: " "))" -- "$cur")); return; fi
              [ "$cmd" = bench ] && cmd="bench ${COMP_WORDS[2]}"
              if [ "$cmd" = models ] && [ "$COMP_CWORD" -eq 2 ] && [[ "$cur" != -* ]]; then COMPREPLY=($(compgen -W "\(modelsSubcommands.joined(separator: " "))" -- "$cur")); return; fi
              [ "$cmd" = models ] && case "${COMP_WORDS[2]}" in \(modelsSubcommands.joined(separator: "|"))) cmd="models ${COMP_WORDS[2]}" ;; esac
              case "$cmd" in
            \(cases.joined(separator: "\n"))
              esac
              if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
            }
            complete -F _earshot earshot
            """
    }

    static func zsh() -> String {
        var lines = ["#compdef earshot", "# earshot completions for zsh: earshot completions zsh > \"${fpath[1]}/_earshot\"", "_earshot() {",
                     "  local -a commands", "  commands=(" + Specs.all.filter { !$0.name.contains(" ") }.map { spec in
                         "'\(spec.name):\(zshEscape(String(spec.summary.split(separator: ".").first ?? "")))'" }.joined(separator: " ")
                         + " 'bench:benchmarks' 'help:commands and their options')",
                     "  if (( CURRENT == 2 )); then _describe command commands; return; fi",
                     "  local cmd=$words[2]", "  [[ $cmd == bench && CURRENT -gt 3 ]] && cmd=\"bench $words[3]\"",
                     "  [[ $cmd == bench && CURRENT == 3 ]] && { compadd \(Specs.benchSubjects.joined(separator: " ")); return; }",
                     "  [[ $cmd == models && CURRENT -gt 3 && \" \(modelsSubcommands.joined(separator: " ")) \" == *\" $words[3] \"* ]] && cmd=\"models $words[3]\"",
                     "  case $cmd in"]
        for spec in Specs.all {
            let specs = spec.options.map { o -> String in
                let value = o.value.map { v -> String in
                    if case let .choice(values) = o.kind { return ":\(v):(\(values.joined(separator: " ")))" }
                    return ":\(zshEscape(v)):_files"
                } ?? ""
                return "'--\(o.name)[\(zshEscape(o.completionHelp))]\(value)'"
            }
            lines.append("    \"\(spec.name)\") _arguments \(specs.joined(separator: " ")) '*:file:_files' ;;")
        }
        lines += ["  esac", "}", "_earshot \"$@\""]
        return lines.joined(separator: "\n")
    }

    static func zshEscape(_ s: String) -> String {
        s.replacingOccurrences(of: "'", with: "'\\''").replacingOccurrences(of: "[", with: "(").replacingOccurrences(of: "]", with: ")")
            .replacingOccurrences(of: ":", with: "\\:")
    }

    static func fish() -> String {
        var lines = ["# earshot completions for fish: earshot completions fish > ~/.config/fish/completions/earshot.fish",
                     "complete -c earshot -f -n '__fish_use_subcommand' -a '\(Specs.commands.joined(separator: " "))'",
                     "complete -c earshot -n '__fish_seen_subcommand_from bench' -a '\(Specs.benchSubjects.joined(separator: " "))'"]
        for spec in Specs.all {
            let words = spec.name.split(separator: " ")
            let condition = words.count == 2 ? "__fish_seen_subcommand_from \(words[0]); and __fish_seen_subcommand_from \(words[1])"
                : "__fish_seen_subcommand_from \(spec.name)"
            for o in spec.options {
                var line = "complete -c earshot -n '\(condition)' -l \(o.name)"
                if let s = o.short { line += " -s \(s)" }
                if case let .choice(values) = o.kind { line += " -x -a '\(values.joined(separator: " "))'" } else if o.value != nil { line += " -r" }
                line += " -d '\(o.completionHelp.replacingOccurrences(of: "'", with: "\\'"))'"
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }

    /// earshot(1) in roff.
    static func manPage() -> String {
        func roff(_ s: String) -> String { s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "-", with: "\\-") }
        var lines = [".TH EARSHOT 1 \"\" \"earshot \(EarshotCommand.version)\" \"User Commands\"", ".SH NAME",
                     "earshot \\- stateful audio models on Linux: label files, listen live, serve Wyoming clients", ".SH SYNOPSIS",
                     ".B earshot", "\\fICOMMAND\\fR [\\fIoptions\\fR] [\\fIoperands\\fR]", ".SH COMMANDS"]
        for spec in Specs.all {
            lines += [".SS \(roff(spec.name))", ".B earshot \(roff(spec.name))" + (spec.options.isEmpty ? "" : " [options]")
                      + (spec.operands.isEmpty ? "" : " \(roff(spec.operands))"), ".PP", roff(spec.summary)]
            for o in spec.options {
                var head = "\\fB\\-\\-\(roff(o.name))\\fR"
                if let s = o.short { head = "\\fB\\-\(s)\\fR, " + head }
                if let v = o.value { head += " \\fI\(roff(v))\\fR" }
                var text = roff(o.help)
                var notes: [String] = o.isRequired ? ["required"] : []
                if let r = o.rangeText { notes.append("range \(roff(r))") }
                if let d = o.defaultText { notes.append("default \(roff(d))") }
                if !notes.isEmpty { text += " (" + notes.joined(separator: "; ") + ")" }
                lines += [".TP", head, text]
            }
            if !spec.examples.isEmpty {
                lines += [".PP", "Examples:", ".nf"] + spec.examples.map { "    " + roff($0) } + [".fi"]
            }
        }
        lines += [".SH EXIT STATUS", "0 done; 64 a usage error; 65 bad data (an audio file or model damaged or not what it claims); "
                 + "66 a missing input; 69 a service unavailable (Redis not reached within --retry-for, or refusing; a download that failed); 73 an output that cannot be created; 74 an I/O error; 1 anything else. With several files, the "
                 + "code of the first that failed.",
                 ".SH MODEL SEARCH PATH", "A model named by \\fB\\-m\\fR \\fINAME\\fR is looked for in these folders, in order; the first "
                 + "holding \\fINAME\\fR/model.json wins. A word with a slash, or a folder holding model.json, is a path.",
                 ".IP 1. 4", "\\fB\\-\\-models\\fR \\fIDIR\\fR, when given;",
                 ".IP 2. 4", "each folder of \\fB$EARSHOT_MODELS\\fR (colon\\-separated);",
                 ".IP 3. 4", "\\fB$XDG_DATA_HOME\\fR/earshot/models (~/.local/share/earshot/models when it is not set);",
                 ".IP 4. 4", "\\fIPREFIX\\fR/share/earshot/models, \\fIPREFIX\\fR being the parent of the folder holding the earshot binary "
                 + "(/usr/bin/earshot looks in /usr/share/earshot/models);",
                 ".IP 5. 4", "Models/ of the Earshot checkout the binary was built in, or of the current folder when it is one.",
                 ".PP", "\\fBearshot models\\fR lists the models found there; a name found nowhere is reported with every folder "
                 + "searched and the names near it (exit 66). The models of the catalog (catalog.json beside the installed models, "
                 + "\\fIPREFIX\\fR/share/earshot/models/catalog.json) that Earshot does not ship are listed too; "
                 + "\\fBearshot models fetch\\fR \\fINAME\\fR installs one into \\fB$XDG_DATA_HOME\\fR/earshot/models.",
                 ".SH ENVIRONMENT", ".TP", "\\fBEARSHOT_MODELS\\fR", "folders of model packages (colon\\-separated), searched by name after \\fB\\-\\-models\\fR.",
                 ".TP", "\\fBXDG_DATA_HOME\\fR", "the user's data folder: models in its earshot/models (default ~/.local/share).",
                 ".TP", "\\fBXDG_CACHE_HOME\\fR", "the user's cache: the downloads of \\fBearshot models fetch\\fR in its earshot/downloads "
                 + "(default ~/.cache), kept by their SHA\\-256; removing it is safe."]
        return lines.joined(separator: "\n")
    }
}

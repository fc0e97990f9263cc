import Earshot
import EarshotJSON
import Foundation

enum InspectCommand {
    static func run(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.inspect)
        guard args.positionals.count == 1, let name = args.positionals.first else {
            throw UsageError("inspect takes one model name or folder", hint: "earshot inspect silero-vad")
        }
        let model = try PrecisionOption.load(args, ModelLocator(args), name)
        try out(args.flag("json") ? try json(model).serialized : text(model))
    }

    /// The description's fields as the package's one JSON writer writes them (sorted keys).
    static func json(_ model: Model) throws -> JSONValue {
        try JSONValue.parse([UInt8](try JSONEncoder().encode(model.description)))
    }

    /// What `inspect` prints: the model's summary, then a table of its layers.
    static func text(_ model: Model, notes: [String] = []) -> String {
        let d = model.description
        // Many labels: the first few and how many.
        let labels: String = d.labels.count <= 12
            ? d.labels.joined(separator: ", ")
            : d.labels.prefix(8).joined(separator: ", ") + ", ... (\(d.labels.count) labels)"
        let run: String = d.productMultiplyAddsPerStep.map { "; the compiled products run \($0)" } ?? ""
        let cost = "cost:      \(d.multiplyAddsPerStep) multiply-adds per step" + run
        var lines = [
            "\(d.name) \(d.version ?? "")  (\(model.path))",
            d.summary.map { "  \($0)" },
            "  author \(d.author ?? "?"), licence \(d.license ?? "?")",
            d.source.map { "  source: \($0)" },
            "input:     \(d.input), \(d.contextSamples) samples of context",
            "front end: \(d.frontEnd)",
            d.execution.map { "runs:      \($0)" },
            "outputs:   \(d.outputActivation) over \(labels)"
                + (model.manifest.outputs.labelForm == .scientificCommon ? " (labels: Scientific name_Common name)" : ""),
            LabelOptions(model: model).events.map { events in
                let options = LabelOptions(model: model)
                let own = events.labelThresholds.isEmpty ? "" : " (\(events.labelThresholds.count) labels their own)"
                let among = events.topK.map { "among its \($0) best and " } ?? ""
                let join = events.mergeGapSeconds.map { "windows of a label joined while the next starts within \($0) s of the event's end" }
                    ?? "every window its own event"
                return "decides:   events: a label is in a window when \(among)at least \(options.threshold)\(own); \(join)"
                    + (events.minDurationSeconds > 0 ? "; events shorter than \(events.minDurationSeconds) s dropped" : "")
            },
            model.manifest.decision?.detectionWindow.map { window in
                let options = LabelOptions(model: model)
                return "decides:   a detection when the mean of the latest \(window) scores is above \(options.threshold), "
                    + "then none for \(Int(options.refractoryMs)) ms"
            },
        ].compactMap { $0 } + notes + [
            "state:     \(d.stateBytesPerStream) bytes per stream"
                + (d.stateStarts ?? []).map { "\n           starts: \($0)" }.joined(),
            "weights:   \(d.parameterCount) parameters, \(d.storageBytes) bytes, hash \(d.contentHash)",
            "layers:    " + d.layerCounts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "),
            cost,
            "",
        ]
        // A table whose columns are as wide as their widest cell.
        let graph = d.layers.contains { $0.kernel != nil }
        var rows = [["layer", "type", "in", "out", "params", "MACs/step", "share"] + (graph ? ["runs as"] : [])]
        for l in d.layers {
            let share = d.multiplyAddsPerStep > 0 ? Double(l.multiplyAdds) * 100 / Double(d.multiplyAddsPerStep) : 0
            rows.append([l.name, l.type, "\(l.inputShape)", "\(l.outputShape)", "\(l.parameters)", "\(l.multiplyAdds)",
                         String(format: "%5.1f%%", share)] + (graph ? [l.kernel ?? ""] : []))
        }
        let widths = rows[0].indices.map { c in rows.map { $0[c].count }.max() ?? 0 }
        for row in rows {
            lines.append(row.enumerated().map { c, cell in c == row.count - 1 ? cell : pad(cell, widths[c] + 1) }.joined())
        }
        return lines.joined(separator: "\n")
    }

    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
    }
}

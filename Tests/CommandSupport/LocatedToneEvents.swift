import Earshot
import EarshotTestSupport
import Foundation

/// The tone-events fixture (Tests/Fixtures/tone-events: 12 tones as labels) with a label filter
/// model beside it, as BirdNET's package holds its location/week model: its input is
/// [lat, lon, week], its 12 scores the product with `weights` (MatMul by a [3, 12] constant),
/// and the rule keeps a label scored 0.03 or more. The six lowest tones (200...800 Hz, labels
/// 0...5) are "northern" (lat / 90), the others "southern" (-lat / 90); the 200 Hz tone fades
/// over the year (-0.1 a week), so a week drops it where the whole year (-1) keeps it:
/// - lat 45, lon 0, week 10 keeps labels 1...5 (0.5 each; the 200 Hz tone 0.5 - 1);
/// - lat 45, lon 0, week -1 keeps labels 0...5;
/// - lat -45 keeps labels 6...11.
public enum LocatedToneEvents {
    /// The filter's [3, 12] weights, row by row (lat, lon, week).
    public static let weights: [Float] = (0..<12).map { $0 < 6 ? 1 / 90 : -1 / 90 } + [Float](repeating: 0, count: 12)
        + (0..<12).map { $0 == 0 ? -0.1 : 0 }

    /// The labels the filter keeps for a place, by the weights above (computed here, not by Earshot).
    public static func kept(labels: [String], lat: Float, lon: Float, week: Float) -> Set<String> {
        Set(labels.indices.filter { j in lat * weights[j] + lon * weights[12 + j] + week * weights[24 + j] >= 0.03 }.map { labels[$0] })
    }

    /// Writes the package into a new temporary folder and returns its path.
    public static func package() throws -> String {
        let source = Repo.root.appendingPathComponent("Tests/Fixtures/tone-events")
        let folder = try Repo.temporaryFolder().appendingPathComponent("located-tones")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: source.appendingPathComponent("weights.safetensors"), to: folder.appendingPathComponent("weights.safetensors"))
        var manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: source.appendingPathComponent("model.json"))) as? [String: Any] ?? [:]
        var decision = manifest["decision"] as? [String: Any] ?? [:]
        var events = decision["events"] as? [String: Any] ?? [:]
        events["labelFilter"] = ["inputs": ["lat", "lon", "week"], "threshold": 0.03, "model": "label-filter"]
        decision["events"] = events
        manifest["decision"] = decision
        manifest["name"] = "located-tones"
        try JSONSerialization.data(withJSONObject: manifest).write(to: folder.appendingPathComponent("model.json"))
        let labels = (manifest["outputs"] as? [String: Any])?["labels"] as? [String] ?? []
        let filter: [String: Any] = [
            "format": "earshot-model", "formatVersion": 1, "name": "located-tones-filter", "version": "1", "license": "MIT",
            "description": "Which tones may occur where and when (a test's label filter).", "source": "Tests/CommandSupport/LocatedToneEvents.swift",
            "audio": ["sampleRate": 8000, "chunkSamples": 3, "contextSamples": 0],
            "frontEnd": ["type": "features", "nFFT": 0, "hopLength": 0],
            "network": [] as [Any],
            "outputs": ["activation": "none", "labels": labels],
            "graph": ["audioInput": "place", "audioShape": [1, 3], "opset": 17, "scoreOutput": "scores", "states": [] as [Any], "constants": [:] as [String: Any],
                      "nodes": [["name": "filter", "op": "MatMul", "inputs": ["place", "weights"], "outputs": ["scores"]]]],
        ]
        let spec = try JSONDecoder().decode(ModelManifest.self, from: JSONSerialization.data(withJSONObject: filter))
        try Model.write(manifest: spec, tensors: ["weights": Tensor(shape: [3, 12], values: weights)], to: folder.appendingPathComponent("label-filter"))
        return folder.path
    }
}

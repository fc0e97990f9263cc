import EarshotFeatures
import EarshotGraph
import EarshotJSON
import EarshotModel
import Foundation

/// Writes a microWakeWord package (one `earshot import` made of a microWakeWord .tflite, or
/// one trained as one) as the two files ESPHome's `micro_wake_word` and pymicro-wakeword
/// load: NAME.tflite, an int8 streaming model over TFLite Micro's audio front end whose ring
/// buffers are resource variables (a CALL_ONCE init subgraph gives their first values,
/// READ_VARIABLE and ASSIGN_VARIABLE carry them between steps), and NAME.json, the manifest
/// (wake word, author, cutoff, sliding window, the tensor arena TFLite Micro needs).
///
/// The file is laid out as microWakeWord's converter lays out okay_nabu.tflite: the package's
/// integer ops become CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, LOGISTIC and QUANTIZE with
/// the scales they were computed from (kept on their nodes), so TFLite's kernels compute the
/// same multipliers, and RESHAPE, CONCATENATION, STRIDED_SLICE and SPLIT_V move the values as
/// the package's ops do. The package's front end (MicroFrontend), the quantization of its
/// features, the gates that hold the states on the front end's first step and the output's
/// dequantization are what the device's own front end and micro_wake_word do.
public enum MicroWakeWordExport {
    /// The exported files' bytes.
    public struct Files: Sendable, Equatable {
        /// NAME.tflite.
        public var tflite: [UInt8]
        /// NAME.json.
        public var json: [UInt8]
        /// The tensor arena TFLite Micro needs (bytes), as written in the manifest.
        public var arenaBytes: Int
    }

    /// The oldest ESPHome whose micro_wake_word loads version 2 manifests with resource variables.
    public static let minimumESPHomeVersion = "2024.7.0"

    /// The package `manifest` and `tensors` as microWakeWord files; `modelFile` is the .tflite's
    /// file name, as the JSON names it.
    /// - Throws: `TrainingError.model` naming the package and the node that has no TFLite form.
    public static func export(manifest: ModelManifest, tensors: [String: Tensor], modelFile: String) throws(TrainingError) -> Files {
        var writer = try Writer(manifest: manifest, tensors: tensors)
        let file = try writer.write()
        let tflite = file.bytes()
        let arena = TFLiteMicroArena.bytes(file.subgraphs)
        return Files(tflite: tflite, json: manifestJSON(manifest, modelFile: modelFile, arena: arena), arenaBytes: arena)
    }

    /// The package in `folder` as microWakeWord files.
    /// - Throws: `ModelError` when the package does not load; `TrainingError.model` naming the
    ///   node that has no TFLite form.
    public static func export(package folder: URL, modelFile: String) throws -> Files {
        let model = try Model(contentsOf: folder)
        let tensors = try SafeTensors.read(path: folder.appendingPathComponent("weights.safetensors").path)
        return try export(manifest: model.manifest, tensors: tensors, modelFile: modelFile)
    }

    /// microWakeWord's model JSON (version 2), in the field order its models ship with.
    static func manifestJSON(_ m: ModelManifest, modelFile: String, arena: Int) -> [UInt8] {
        func quoted(_ s: String) -> String { JSONValue.string(s).serialized }
        let languages = (m.languages ?? []).map(quoted).joined(separator: ",")
        let text = """
        {
          "type": "micro",
          "wake_word": \(quoted(m.phrase ?? m.name)),
          "author": \(quoted(m.author ?? "")),
          "website": \(quoted(m.url ?? "")),
          "model": \(quoted(modelFile)),
          "trained_languages": [\(languages)],
          "version": 2,
          "micro": {
            "probability_cutoff": \(m.decision?.threshold ?? 0.5),
            "feature_step_size": \(MicroFrontend.stepSamples * 1000 / MicroFrontend.sampleRate),
            "sliding_window_size": \(m.decision?.detectionWindow ?? 5),
            "tensor_arena_size": \(arena),
            "minimum_esphome_version": \(quoted(minimumESPHomeVersion))
          }
        }

        """
        return Array(text.utf8)
    }
}

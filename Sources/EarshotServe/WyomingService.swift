import Earshot
import EarshotWyoming

/// What every Wyoming session of a service shares: its models, their names as wake words, and
/// the answer to `describe`.
struct WyomingService {
    let models: [ServedModel]
    let info: WyomingEvent
    /// Every wake word the service has, as `info` names them.
    let wakeNames: [String]

    init(models: [ServedModel], version: String) {
        self.models = models
        info = Self.makeInfo(models: models, version: version)
        wakeNames = models.filter(\.isWakeWord).flatMap { m in m.eventLabels.map { m.wakeName(label: $0) } }
    }

    /// The answer to `describe`: the wake words as Home Assistant lists them, the voice
    /// activity models under `vad`, and the sound-events models under `sound_events`, whose
    /// program names the event they answer with (`"events": ["sound-event"]`).
    static func makeInfo(models: [ServedModel], version: String) -> WyomingEvent {
        let earshot: JSONValue = ["name": "Earshot", "url": "https://github.com/earshot"]
        func attribution(_ m: ServedModel) -> JSONValue {
            ["name": .string(m.model.manifest.author ?? "unknown"), "url": .string(m.model.manifest.url ?? m.model.manifest.source ?? "")]
        }
        var wakeModels: [JSONValue] = []
        var vadModels: [JSONValue] = []
        var soundModels: [JSONValue] = []
        for m in models {
            let manifest = m.model.manifest
            // Home Assistant shows a wake word by its description: the phrase, as the Wyoming
            // wake-word services give it.
            func entry(name: String, phrase: String?) -> JSONValue {
                .object(["name": .string(name), "attribution": attribution(m), "installed": true,
                         "description": .string(phrase ?? manifest.description ?? m.model.name),
                         "version": manifest.version.map(JSONValue.string) ?? .null,
                         "languages": .array((manifest.languages ?? []).map(JSONValue.string)),
                         "phrase": phrase.map(JSONValue.string) ?? .null])
            }
            if m.isWakeWord {
                let labels = m.eventLabels
                for label in labels {
                    wakeModels.append(entry(name: m.wakeName(label: label), phrase: labels.count == 1 ? (manifest.phrase ?? label) : label))
                }
            } else if m.isSoundEvents {
                soundModels.append(entry(name: m.model.name, phrase: nil))
            } else {
                vadModels.append(entry(name: m.model.name, phrase: nil))
            }
        }
        func program(_ description: String, _ list: [JSONValue]) -> JSONValue {
            ["name": "earshot", "attribution": earshot, "installed": true, "description": .string(description),
             "version": .string(version), "models": .array(list)]
        }
        var data: [String: JSONValue] = ["asr": [], "tts": [], "handle": [], "intent": [], "mic": [], "snd": [],
                                         "wake": wakeModels.isEmpty ? [] : [program("Earshot wake-word detection", wakeModels)]]
        // Wyoming's info has no place for voice activity; clients ignore keys they do not know.
        if !vadModels.isEmpty { data["vad"] = [program("Earshot voice activity detection", vadModels)] }
        // Nor for sound events: a program of Earshot's own that names its answer, an event type
        // Wyoming does not have (its clients, Home Assistant's among them, skip it).
        if !soundModels.isEmpty, case var .object(p) = program("Earshot sound events", soundModels) {
            p["events"] = [.string(WyomingSession.soundEvent)]
            data["sound_events"] = [.object(p)]
        }
        return WyomingEvent(type: "info", data: data)
    }
}

import Earshot

enum DevicesCommand {
    static func run(_ words: [String]) throws {
        _ = try Arguments(words, spec: Specs.devices)
        let (pcms, cards) = CaptureDevice.list()
        try out("sound cards:")
        if cards.isEmpty { try out("  (none found: no sound card on this machine)") }
        for card in cards { try out("  \(card.name)  \(card.description)") }
        try out("capture PCMs (use with earshot listen --device NAME):")
        if pcms.isEmpty { try out("  (none)") }
        for pcm in pcms { try out("  \(pcm.name)" + (pcm.description.isEmpty ? "" : "  \(pcm.description)")) }
    }
}

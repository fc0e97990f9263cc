/// JSON string literals, for the JSON the package writes by hand (safetensors headers, event
/// lines): written by the package's one JSON writer (`JSONValue`).
package enum JSONText {
    package static func quoted(_ s: String) -> String { JSONValue.string(s).serialized }
}

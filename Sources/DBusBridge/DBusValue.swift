import Foundation

/// A D-Bus value with its type: what a message carries, in both directions.
///
/// Containers keep what their signature needs even when empty: an array knows the signature of
/// its elements. A byte array (`ay`) is always ``bytes(_:)`` (reading one never yields
/// `.array("y", …)`; writing `.array("y", …)` of ``byte(_:)`` values is accepted too).
/// A dictionary (`a{kv}`) is an array of ``dictionaryEntry(_:_:)`` values: build one with
/// ``dictionary(keySignature:valueSignature:_:)``, read it with ``dictionaryEntries``.
public indirect enum DBusValue: Sendable, Hashable, CustomStringConvertible {
    /// `y`
    case byte(UInt8)
    /// `b`
    case boolean(Bool)
    /// `n`
    case int16(Int16)
    /// `q`
    case uint16(UInt16)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `x`
    case int64(Int64)
    /// `t`
    case uint64(UInt64)
    /// `d`
    case double(Double)
    /// `s`
    case string(String)
    /// `o`
    case objectPath(String)
    /// `g`
    case signature(String)
    /// `ay`
    case bytes(Data)
    /// `a<element>`: every element has the signature `element`.
    case array(element: String, [DBusValue])
    /// `(…)`
    case structure([DBusValue])
    /// `{kv}`, only inside an array.
    case dictionaryEntry(DBusValue, DBusValue)
    /// `v`
    case variant(DBusValue)

    /// The value's complete D-Bus signature (`"a{sv}"`, `"(oayays)"`, …).
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .dictionaryEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .variant: "v"
        }
    }

    /// An `a{kv}` dictionary of `entries`, in their order.
    public static func dictionary(keySignature: String, valueSignature: String, _ entries: [(DBusValue, DBusValue)]) -> DBusValue {
        .array(element: "{" + keySignature + valueSignature + "}", entries.map { .dictionaryEntry($0.0, $0.1) })
    }

    /// An `a{sv}` dictionary (D-Bus properties and options), sorted by key.
    public static func properties(_ values: [String: DBusValue]) -> DBusValue {
        dictionary(keySignature: "s", valueSignature: "v", values.sorted { $0.key < $1.key }.map { (.string($0.key), .variant($0.value)) })
    }

    /// An `a{ss}` dictionary (attributes), sorted by key.
    public static func stringDictionary(_ values: [String: String]) -> DBusValue {
        dictionary(keySignature: "s", valueSignature: "s", values.sorted { $0.key < $1.key }.map { (.string($0.key), .string($0.value)) })
    }

    /// An `as` array.
    public static func strings(_ values: [String]) -> DBusValue {
        .array(element: "s", values.map(DBusValue.string))
    }

    /// An `ao` array.
    public static func objectPaths(_ values: [String]) -> DBusValue {
        .array(element: "o", values.map(DBusValue.objectPath))
    }

    // MARK: - Reading

    /// The string of `s`, `o` or `g` (`nil` for other types).
    public var stringValue: String? {
        switch self {
        case .string(let value), .objectPath(let value), .signature(let value): value
        default: nil
        }
    }

    /// The value of `b` (`nil` for other types).
    public var boolValue: Bool? {
        if case .boolean(let value) = self { value } else { nil }
    }

    /// The value of any integer type that fits in `Int64` (`nil` for other types).
    public var integerValue: Int64? {
        switch self {
        case .byte(let value): Int64(value)
        case .int16(let value): Int64(value)
        case .uint16(let value): Int64(value)
        case .int32(let value): Int64(value)
        case .uint32(let value): Int64(value)
        case .int64(let value): value
        case .uint64(let value): Int64(exactly: value)
        default: nil
        }
    }

    /// The bytes of `ay` (also of an `.array("y", …)` of bytes; `nil` for other types).
    public var bytesValue: Data? {
        switch self {
        case .bytes(let data): return data
        case .array("y", let elements):
            var data = Data()
            for element in elements {
                guard case .byte(let byte) = element else { return nil }
                data.append(byte)
            }
            return data
        default: return nil
        }
    }

    /// The elements of an array, the fields of a structure (`nil` for other types).
    public var elements: [DBusValue]? {
        switch self {
        case .array(_, let elements), .structure(let elements): elements
        default: nil
        }
    }

    /// The value inside a variant; any other value itself.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { inner.unwrapped } else { self }
    }

    /// The entries of a dictionary `a{kv}`, in order (`nil` for other types).
    public var dictionaryEntries: [(key: DBusValue, value: DBusValue)]? {
        guard case .array(let element, let entries) = self, element.hasPrefix("{") else { return nil }
        return entries.compactMap { entry in
            if case .dictionaryEntry(let key, let value) = entry { (key, value) } else { nil }
        }
    }

    /// A dictionary with string keys (`a{sv}`, `a{ss}`, `a{o…}`), variants unwrapped
    /// (`nil` for other types; a repeated key keeps its last value).
    public var stringKeyedDictionary: [String: DBusValue]? {
        guard let entries = dictionaryEntries else { return nil }
        var result: [String: DBusValue] = [:]
        for (key, value) in entries {
            guard let key = key.stringValue else { return nil }
            result[key] = value.unwrapped
        }
        return result
    }

    public var description: String {
        switch self {
        case .byte(let value): "\(value)"
        case .boolean(let value): "\(value)"
        case .int16(let value): "\(value)"
        case .uint16(let value): "\(value)"
        case .int32(let value): "\(value)"
        case .uint32(let value): "\(value)"
        case .int64(let value): "\(value)"
        case .uint64(let value): "\(value)"
        case .double(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .objectPath(let value): value
        case .signature(let value): "signature \(value)"
        case .bytes(let data): "\(data.count) bytes"
        case .array(_, let elements): "[" + elements.map(\.description).joined(separator: ", ") + "]"
        case .structure(let fields): "(" + fields.map(\.description).joined(separator: ", ") + ")"
        case .dictionaryEntry(let key, let value): "\(key): \(value)"
        case .variant(let inner): "<\(inner)>"
        }
    }
}

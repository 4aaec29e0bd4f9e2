import CSystemd
import Foundation

/// Writing ``DBusValue``s into an sd-bus message and reading them back (owner thread only).
enum DBusMessageCoding {
    static func append(_ values: [DBusValue], to message: OpaquePointer) throws(DBusError) {
        for value in values { try append(value, to: message) }
    }

    static func append(_ value: DBusValue, to message: OpaquePointer) throws(DBusError) {
        func check(_ result: Int32) throws(DBusError) {
            if result < 0 { throw DBusError("appending \(value.signature)", result: result) }
        }
        func basic<T>(_ type: Character, _ value: T) throws(DBusError) {
            var copy = value
            try check(withUnsafePointer(to: &copy) { sd_bus_message_append_basic(message, CChar(type.asciiValue!), $0) })
        }
        func container(_ type: Character, _ contents: String, _ body: () throws(DBusError) -> Void) throws(DBusError) {
            try check(sd_bus_message_open_container(message, CChar(type.asciiValue!), contents))
            try body()
            try check(sd_bus_message_close_container(message))
        }
        switch value {
        case .byte(let byte): try basic("y", byte)
        case .boolean(let bool): try basic("b", Int32(bool ? 1 : 0))
        case .int16(let int): try basic("n", int)
        case .uint16(let int): try basic("q", int)
        case .int32(let int): try basic("i", int)
        case .uint32(let int): try basic("u", int)
        case .int64(let int): try basic("x", int)
        case .uint64(let int): try basic("t", int)
        case .double(let double): try basic("d", double)
        case .string(let string), .objectPath(let string), .signature(let string):
            // Strings are passed as the pointer itself (sd_bus_message_append_basic(3)).
            let type = CChar(value.signature.first!.asciiValue!)
            try check(string.withCString { sd_bus_message_append_basic(message, type, $0) })
        case .bytes(let data):
            try check(data.withUnsafeBytes { sd_bus_message_append_array(message, CChar(UInt8(ascii: "y")), $0.baseAddress, $0.count) })
        case .array(let element, let elements):
            try container("a", element) { () throws(DBusError) in
                for element in elements { try append(element, to: message) }
            }
        case .structure(let fields):
            try container("r", String(value.signature.dropFirst().dropLast())) { () throws(DBusError) in
                for field in fields { try append(field, to: message) }
            }
        case .dictionaryEntry(let key, let entryValue):
            try container("e", key.signature + entryValue.signature) { () throws(DBusError) in
                try append(key, to: message)
                try append(entryValue, to: message)
            }
        case .variant(let inner):
            try container("v", inner.signature) { () throws(DBusError) in try append(inner, to: message) }
        }
    }

    /// Every value left at the current level of `message`.
    static func readAll(_ message: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var values: [DBusValue] = []
        while let value = try read(message) { values.append(value) }
        return values
    }

    /// The next value of `message`, `nil` at the end of the current level.
    static func read(_ message: OpaquePointer) throws(DBusError) -> DBusValue? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        let peeked = sd_bus_message_peek_type(message, &type, &contents)
        if peeked < 0 { throw DBusError("reading a message", result: peeked) }
        if peeked == 0 { return nil }
        func check(_ result: Int32) throws(DBusError) {
            if result < 0 { throw DBusError("reading a message", result: result) }
        }
        func basic<T>(_ initial: T) throws(DBusError) -> T {
            var value = initial
            try check(withUnsafeMutablePointer(to: &value) { sd_bus_message_read_basic(message, type, $0) })
            return value
        }
        func string() throws(DBusError) -> String {
            var pointer: UnsafePointer<CChar>?
            try check(sd_bus_message_read_basic(message, type, &pointer))
            return pointer.map { String(cString: $0) } ?? ""
        }
        let inner = contents.map { String(cString: $0) } ?? ""
        func container(_ build: ([DBusValue]) -> DBusValue) throws(DBusError) -> DBusValue {
            try check(sd_bus_message_enter_container(message, type, inner))
            let values = try readAll(message)
            try check(sd_bus_message_exit_container(message))
            return build(values)
        }
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "y"): return .byte(try basic(UInt8(0)))
        case UInt8(ascii: "b"): return .boolean(try basic(Int32(0)) != 0)
        case UInt8(ascii: "n"): return .int16(try basic(Int16(0)))
        case UInt8(ascii: "q"): return .uint16(try basic(UInt16(0)))
        case UInt8(ascii: "i"): return .int32(try basic(Int32(0)))
        case UInt8(ascii: "u"): return .uint32(try basic(UInt32(0)))
        case UInt8(ascii: "x"): return .int64(try basic(Int64(0)))
        case UInt8(ascii: "t"): return .uint64(try basic(UInt64(0)))
        case UInt8(ascii: "d"): return .double(try basic(Double(0)))
        case UInt8(ascii: "s"): return .string(try string())
        case UInt8(ascii: "o"): return .objectPath(try string())
        case UInt8(ascii: "g"): return .signature(try string())
        case UInt8(ascii: "a") where inner == "y":
            var pointer: UnsafeRawPointer?
            var size = 0
            try check(sd_bus_message_read_array(message, CChar(UInt8(ascii: "y")), &pointer, &size))
            return .bytes(pointer.map { Data(bytes: $0, count: size) } ?? Data())
        case UInt8(ascii: "a"): return try container { .array(element: inner, $0) }
        case UInt8(ascii: "r"): return try container { .structure($0) }
        case UInt8(ascii: "e"):
            return try container { $0.count == 2 ? .dictionaryEntry($0[0], $0[1]) : .structure($0) }
        case UInt8(ascii: "v"): return try container { $0.first.map(DBusValue.variant) ?? .variant(.structure([])) }
        default:
            throw DBusError(name: "org.freedesktop.DBus.Error.InvalidSignature", message: "Unsupported D-Bus type \(type).")
        }
    }
}

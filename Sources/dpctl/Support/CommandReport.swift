import DataProtection
import DataProtectionAgent
import Foundation

/// What a command that changes something reports with `--json` (`put`, `get -o`, `unlock`,
/// `lock`, `init`, `erase`, `passcode …`, `agent start|stop`): one JSON object, sorted keys,
/// every key always present (`null` where it does not apply), so that scripts can rely on
/// its shape. The text report is printed otherwise.
struct CommandReport: Encodable {
    /// The agent a command went through (or started, or stopped).
    struct Agent: Encodable {
        var pid: Int32
        var socket: String

        init(pid: Int32, socket: String) {
            self.pid = pid
            self.socket = socket
        }

        init(_ agent: AgentStore) {
            self.init(pid: agent.agentProcessIdentifier, socket: agent.socketPath)
        }
    }

    /// A field's value.
    enum Value: Encodable {
        case null, bool(Bool), integer(Int64), string(String), agent(Agent)

        /// A string, or `null` for `nil`.
        static func text(_ value: String?) -> Value { value.map(Value.string) ?? .null }

        /// An agent, or `null` for `nil` (none ran).
        static func agent(_ value: Agent?) -> Value { value.map(Value.agent) ?? .null }

        /// A count of bytes.
        static func bytes(_ value: UInt64) -> Value { .integer(Int64(clamping: value)) }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let value): try container.encode(value)
            case .integer(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            case .agent(let value): try container.encode(value)
            }
        }
    }

    /// The fields (the encoder sorts them).
    let fields: KeyValuePairs<String, Value>

    init(_ fields: KeyValuePairs<String, Value>) {
        self.fields = fields
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (key, value) in fields { try container.encode(value, forKey: Key(key)) }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Prints the report as JSON when `json`, else `text`.
    func print(json: Bool, text: String) throws {
        if json { return try printJSON(self) }
        Swift.print(text)
    }
}

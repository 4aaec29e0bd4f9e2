import DataProtection
import Foundation
import Testing

/// `.none` names the class `none` wherever a new item's class is chosen; "not given" is
/// `.inherited` (or `nil`). With `ProtectionClass?` parameters, `.none` silently meant
/// "not given" and the item took the default class.
@Suite("Protection choice")
struct ProtectionChoiceTests {
    @Test(".none is the class none in write, openFile, createDirectory, copyItem and encode; .inherited and nil inherit")
    func noneIsTheClassNone() throws {
        let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("dpchoice-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
        try store.device.unlock()
        func protectionClass(_ path: String) throws -> ProtectionClass? { try store.attributesOfItem(atPath: path).protectionClass }

        try store.write(Data("a".utf8), to: "written", protection: .none)
        try store.openFile(atPath: "opened", create: true, protection: .none).close()
        try store.createDirectory(atPath: "directory", protection: .none)
        try store.copyItem(atPath: "written", toPath: "copied", protection: .none)
        try store.encode(["key": "value"], to: "encoded", protection: .none)
        for path in ["written", "opened", "directory", "copied", "encoded"] {
            #expect(try protectionClass(path) == ProtectionClass.none, "\(path)")
        }
        try store.write(Data("b".utf8), to: "directory/inherits", protection: .inherited)
        try store.write(Data("c".utf8), to: "directory/inherits-too", protection: nil)
        #expect(try protectionClass("directory/inherits") == ProtectionClass.none)
        #expect(try protectionClass("directory/inherits-too") == ProtectionClass.none)
        try store.write(Data("d".utf8), to: "default")
        #expect(try protectionClass("default") == .completeUntilFirstUserAuthentication)
        #expect(ProtectionChoice(nil) == .inherited && ProtectionChoice(.complete) == .complete)
        #expect("\(ProtectionChoice.none)" == "none" && "\(ProtectionChoice.inherited)" == "inherited")
    }
}

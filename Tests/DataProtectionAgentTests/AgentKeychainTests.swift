import DataProtection
import DataProtectionAgent
import DataProtectionSQLite
import Foundation
import Testing

@Suite struct AgentKeychainTests {
    @Test("every item operation through the agent, as in the agent")
    func itemsThroughTheAgent() throws {
        try withAgent { agent in
            let client = try agent.client()
            try client.device.unlock(passcode: "1234")
            let keychain = client.keychain
            #expect(try keychain.generation == 0)
            let item = try keychain.add(ItemSecret(bytes: [0, 1, 2, 255]), label: "Mail", attributes: ["service": "mail", "account": "ann"])
            #expect(try keychain.item(withID: item.id) == item)
            #expect(try agent.store.keychain.item(withID: item.id) == item)
            #expect(try keychain.secret(service: "mail", account: "ann").withUnsafeBytes { Array($0) } == [0, 1, 2, 255])
            expectCode(.fileExists) { try keychain.add(ItemSecret("x"), label: "x", attributes: ["service": "mail", "account": "ann"]) }
            let replaced = try keychain.setSecret(ItemSecret("new"), service: "mail", account: "ann")
            #expect(replaced.id == item.id)
            #expect(try keychain.secret(ofItemWithID: item.id).secretString == "new")
            try keychain.add(ItemSecret("afu"), label: "Token", attributes: ["service": "sync"], accessibility: .afterFirstUnlockThisDeviceOnly)
            #expect(try keychain.items(matching: [:]).items.count == 2)
            #expect(try keychain.updateItem(withID: item.id, label: "Mail 2").label == "Mail 2")
            #expect(try keychain.update(matching: ["service": "sync"], secret: ItemSecret("afu2")).count == 1)
            #expect(try keychain.secret(matching: ["service": "sync"]).secretString == "afu2")
            #expect(try keychain.generation == 5)

            // The agent locks: the whenUnlocked item is locked, the afterFirstUnlock one is not.
            try client.device.lock()
            let search = try keychain.items(matching: [:])
            #expect(search.items.map(\.label) == ["Token"])
            #expect(search.lockedAccessibilities.contains(.whenUnlocked))
            expectCode(.protectedDataUnavailable) { _ = try keychain.secret(service: "mail", account: "ann") }
            #expect(try keychain.secret(matching: ["service": "sync"]).secretString == "afu2")
            try client.device.unlock(passcode: "1234")

            #expect(try keychain.delete(matching: ["service": "sync"]) == 1)
            try keychain.deleteItem(withID: item.id)
            expectCode(.fileNotFound) { try keychain.deleteItem(withID: item.id) }
            expectCode(.fileNotFound) { _ = try keychain.item(matching: ["service": "mail"]) }
            expectCode(.invalidPath) { _ = try client.contentsOfDirectory(atPath: ".dataprotection-items") }
            #expect(try client.contentsOfDirectory(atPath: "/").isEmpty)
        }
    }

    @Test("item requests round-trip through their frames")
    func itemRequestFrames() throws {
        let requests: [AgentRequest] = [
            .itemAdd(label: "L", attributes: ["a": "1", "b": ""], accessibility: .whenPasscodeSetThisDeviceOnly, replacing: true,
                     secret: ItemSecret(bytes: [9, 0, 9])),
            .itemSearch(attributes: [:], accessibilities: [.afterFirstUnlock, .whenUnlockedThisDeviceOnly]),
            .itemByID(id: "00ff"), .itemSecret(id: "ab"),
            .itemUpdate(id: "ab", label: nil, attributes: ["x": "y"], secret: nil),
            .itemUpdateMatching(attributes: ["x": "y"], label: "M", newAttributes: nil, secret: ItemSecret("s")),
            .itemDelete(id: "ab"), .itemDeleteMatching(attributes: ["k": "v"]), .itemGeneration,
            .itemUpdateAccessibility(id: "ab", accessibility: .afterFirstUnlockThisDeviceOnly, label: "N", attributes: nil,
                                     secret: ItemSecret(bytes: [1, 2])),
        ]
        for (request, code) in zip(requests, 40...49) {
            let frame = request.encoded()
            #expect(Int(frame[0]) == code)
            #expect(try AgentRequest.decode(frame) == request)
            // A frame cut anywhere is refused, never misread.
            for cut in 1..<frame.count {
                #expect(throws: AgentProtocolViolation.self) { _ = try AgentRequest.decode(Array(frame[..<cut])) }
            }
        }
        #expect(throws: AgentProtocolViolation.self) { _ = try AgentRequest.decode([41, 0, 0, 0, 0, 0x40]) }
        #expect(throws: AgentProtocolViolation.self) { _ = try AgentRequest.decode([42, 0, 0, 0, 1, 0x61, 0]) }
    }
}

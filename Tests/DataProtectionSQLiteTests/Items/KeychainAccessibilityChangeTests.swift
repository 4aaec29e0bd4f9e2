import DataProtection
import DataProtectionSQLite
import Foundation
import Testing

/// `updateItem(withID:…accessibility:)`: an item changes accessibility, within its domain or
/// into another (a move between databases, crash-safe: ItemCrashHarnessTests kills the
/// process during moves).
@Suite struct KeychainAccessibilityChangeTests {
    @Test("an item moves between domains keeping its identifier, creation date, attributes and secret; the lock rules follow")
    func moveAcrossDomains() throws {
        try withDatabaseStore { fixture in
            let keychain = fixture.store.keychain
            let item = try keychain.add(ItemSecret("moving secret"), label: "Mover", attributes: ["service": "move", "account": "ann"])
            let other = try keychain.add(ItemSecret("stays"), label: "Stays", attributes: ["service": "stay"])

            // Within the domain: whenUnlocked to whenUnlockedThisDeviceOnly (same database).
            let sameDomain = try keychain.updateItem(withID: item.id, accessibility: .whenUnlockedThisDeviceOnly)
            #expect(sameDomain.accessibility == .whenUnlockedThisDeviceOnly && sameDomain.id == item.id)

            // Into another domain, with a new label at the same time.
            let moved = try keychain.updateItem(withID: item.id, label: "Moved", accessibility: .afterFirstUnlock)
            #expect(moved.id == item.id && moved.creationDate == item.creationDate && moved.accessibility == .afterFirstUnlock)
            #expect(moved.label == "Moved" && moved.attributes == item.attributes)
            let all = try keychain.items(matching: [:])
            #expect(all.items.filter { $0.id == item.id }.count == 1)
            #expect(all.items.count == 2)
            #expect(try keychain.item(withID: item.id).accessibility == .afterFirstUnlock)
            #expect(try keychain.secret(ofItemWithID: item.id) == ItemSecret("moving secret"))

            // After the lock (grace 0) it is readable (afterFirstUnlock), the whenUnlocked one is not.
            try fixture.device.lock()
            #expect(try keychain.secret(ofItemWithID: item.id) == ItemSecret("moving secret"))
            expectCode(.protectedDataUnavailable) { _ = try keychain.secret(ofItemWithID: other.id) }
            // A move into a locked domain is refused, and the item stays where it is.
            expectCode(.protectedDataUnavailable) { try keychain.updateItem(withID: item.id, accessibility: .whenUnlocked) }
            try fixture.unlock()
            #expect(try keychain.item(withID: item.id).accessibility == .afterFirstUnlock)

            // The target's attribute set taken: fileExists, nothing moved.
            let clash = try keychain.add(ItemSecret("clash"), label: "Clash", attributes: ["service": "stay"], accessibility: .afterFirstUnlock)
            expectCode(.fileExists) { try keychain.updateItem(withID: other.id, accessibility: .afterFirstUnlock) }
            #expect(try keychain.item(withID: other.id).accessibility == .whenUnlocked)
            #expect(try keychain.items(matching: ["service": "stay"]).items.count == 2)

            // Back, with a new secret; and into the passcode domain.
            try keychain.deleteItem(withID: clash.id)
            let back = try keychain.updateItem(withID: item.id, secret: ItemSecret("new secret"), accessibility: .whenUnlocked)
            #expect(back.accessibility == .whenUnlocked)
            #expect(try keychain.secret(ofItemWithID: item.id) == ItemSecret("new secret"))
            _ = try keychain.updateItem(withID: item.id, accessibility: .whenPasscodeSetThisDeviceOnly)
            #expect(try keychain.item(withID: item.id).accessibility == .whenPasscodeSetThisDeviceOnly)

            #expect(try keychain.items(matching: ["service": "move"]).items.map(\.accessibility) == [.whenPasscodeSetThisDeviceOnly])
        }
    }
}

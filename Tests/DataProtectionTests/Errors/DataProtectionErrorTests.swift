import Foundation
import Testing
import DataProtection

@Suite struct DataProtectionErrorTests {
    /// Before: "The operation could not be completed. (DataProtection.DataProtectionError error 1.)".
    @Test func localizedDescriptionSaysWhatHappened() {
        let error: any Error = DataProtectionError(.protectedDataUnavailable, "The complete class key is not available.",
                                                   hint: "Unlock the device, then try again.")
        #expect(error.localizedDescription == "The complete class key is not available. (protectedDataUnavailable) Unlock the device, then try again.")
        #expect((error as? LocalizedError)?.recoverySuggestion == "Unlock the device, then try again.")
        #expect((error as NSError).localizedDescription.contains("protectedDataUnavailable"))
    }

    /// Before: an uncaught error printed "… (protectedDataUnavailable)" and dropped the hint.
    @Test func uncaughtErrorShowsTheHint() {
        let error = DataProtectionError(.storeBusy, "The store is in use.", hint: "Wait for it.")
        #expect(String(reflecting: error) == "The store is in use. (storeBusy) Wait for it.")
        #expect(String(describing: error) == "The store is in use. (storeBusy)")
        let plain = DataProtectionError(.fileNotFound, "No such file: a.")
        #expect(String(reflecting: plain) == "No such file: a. (fileNotFound)")
    }

    /// Before: every missing class key said "the device is locked", before the first unlock too.
    @Test func unavailableSaysWhyTheKeyIsMissing() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("errors-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try ProtectedStore(directory: folder, configuration: DeviceConfiguration(passcodeCost: .minimal))
        #expect(throws: DataProtectionError.self) { try store.write(Data("x".utf8), to: "a", protection: .complete) }
        do {
            try store.write(Data("x".utf8), to: "a", protection: .complete)
        } catch {
            #expect(error.code == .protectedDataUnavailable)
            #expect(error.message.contains("has not been unlocked since it started"), "\(error)")
        }
        try store.device.unlock()
        try store.write(Data("x".utf8), to: "a", protection: .complete)
        try store.device.lock()
        do {
            _ = try store.contents(atPath: "a")
            Issue.record("read a complete file while locked")
        } catch {
            #expect(error.message.contains("the device is locked"), "\(error)")
        }
    }
}

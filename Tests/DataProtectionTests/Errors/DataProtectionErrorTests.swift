import Foundation
import Testing
import DataProtection

@Suite struct DataProtectionErrorTests {
    /// Before: "The operation could not be completed. (DataProtection.DataProtectionError error 1.)".
    @Test func localizedDescriptionSaysWhatHappened() {
        let error: any Error = DataProtectionError(.protectedDataUnavailable, "The complete class key is not available.",
                                                   hint: "Unlock the device, then try again.")
        #expect(error.localizedDescription == "The complete class key is not available. (protectedDataUnavailable)")
        #expect((error as? LocalizedError)?.recoverySuggestion == "Unlock the device, then try again.")
        #expect((error as NSError).localizedDescription.contains("protectedDataUnavailable"))
    }
}

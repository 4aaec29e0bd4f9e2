import DataProtection
import DataProtectionBackup
import Foundation
import SystemPackage

extension AgentSession {
    /// `backupCreate` (code 50): makes the archive of the whole store here, at one instant
    /// (no change of any client runs meanwhile: ``AgentStoreGate``), and writes its age
    /// ciphertext into `descriptor`; the plaintext never leaves the agent.
    func performBackup(recipients: [String], passphrase: Passcode?, workFactor: UInt8, items: Bool, descriptor: FileDescriptor?)
        throws(DataProtectionError) -> AgentResponse {
        guard let descriptor else {
            throw DataProtectionError(.invalidArgument, "backupCreate needs a descriptor passed with the request, where the archive goes.")
        }
        defer { try? descriptor.close() }
        var ageRecipients = try recipients.map { (text: String) throws(DataProtectionError) in try AgeRecipient(text) }
        if let passphrase {
            guard recipients.isEmpty else {
                throw DataProtectionError(.invalidArgument, "A passphrase archive has no other recipient (the age specification).")
            }
            ageRecipients.append(try AgeRecipient(passphrase: passphrase, workFactor: Int(workFactor)))
        }
        guard !ageRecipients.isEmpty else {
            throw DataProtectionError(.invalidArgument, "No recipient.", hint: "Pass -r age1…, -R <file> or --passphrase.")
        }
        let keychain = items ? KeychainBackupItems(server.keychain) : nil
        let summary = try server.storeGate.snapshot(waitingUpTo: AgentWireFormat.backupGateWait) { () throws(DataProtectionError) in
            try Backup.create(of: store, device: device, to: .fileDescriptor(descriptor), recipients: ageRecipients, items: keychain)
        }
        return .ok(AgentBackupSummary(summary).encoded())
    }
}

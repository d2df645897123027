import HeraldPostgres

extension PostgresConnection {
    /// Adds app `app`, sending through FCM project `project` (its rows of `herald.apps` and
    /// `herald.app_fcm`), as an operator would; `credentialsFile` nil: `GOOGLE_APPLICATION_CREDENTIALS`.
    public func addApp(_ app: String, fcmProject project: String, credentialsFile: String? = nil) async throws {
        try await query("INSERT INTO herald.apps (app_id) VALUES ($1)", [app])
        try await query(
            "INSERT INTO herald.app_fcm (app_id, project_id, credentials_file) VALUES ($1, $2, $3)",
            [app, project, credentialsFile])
    }
}

import Foundation

/// Loads each model once per folder and hands the same instance to every stream that asks.
/// Loading runs off the caller's actor; concurrent requests for one folder share one load.
public actor ModelStore {
    /// One store for the process.
    public static let shared = ModelStore()

    private var loaded: [String: Task<Model, Error>] = [:]

    /// An empty store.
    public init() {}

    /// The model in `folder`, loading it on first use.
    public func model(at folder: URL) async throws -> Model {
        let key = folder.standardizedFileURL.resolvingSymlinksInPath().path
        if let task = loaded[key] { return try await task.value }
        let task = Task.detached(priority: .userInitiated) { () throws -> Model in try Model(contentsOf: folder) }
        loaded[key] = task
        do {
            return try await task.value
        } catch {
            // A failed load is not kept (a fixed package loads next time), unless another load
            // has taken its place meanwhile.
            if loaded[key] == task { loaded[key] = nil }
            throw error
        }
    }

    /// Forgets the model in `folder`; streams that hold it keep it until they finish.
    public func unload(_ folder: URL) {
        loaded[folder.standardizedFileURL.resolvingSymlinksInPath().path] = nil
    }

    /// Folders of the models loaded now.
    public var loadedFolders: [String] { loaded.keys.sorted() }
}

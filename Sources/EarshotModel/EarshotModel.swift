// Placeholder until this module's issue lands.

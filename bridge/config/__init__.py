"""The bridge's configuration: the settings model, its resolution, the settings file and its writes."""

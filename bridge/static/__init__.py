"""The settings page: HTML, CSS and JS served inlined by bridge.web.settings_page."""

"""Validation of heartbeats sent by outside processes (``POST /api/processes/heartbeat``)."""

from __future__ import annotations

from django import forms


class ExternalHeartbeatForm(forms.Form):
    """The facts an outside DeerFlow process reports about itself."""

    instance_id = forms.CharField(max_length=64, help_text="stable per process start, e.g. a uuid4 hex")
    name = forms.CharField(max_length=255, required=False)
    host = forms.CharField(max_length=255)
    pid = forms.IntegerField(min_value=0)
    mode = forms.ChoiceField(choices=[("full", "full"), ("delta", "delta")])
    snapshot_frequency = forms.IntegerField(min_value=1)
    config_path = forms.CharField(max_length=1024, required=False)
    config_sha256 = forms.RegexField(regex=r"^[0-9a-f]{64}$", required=False)
    max_supersteps = forms.IntegerField(min_value=1, required=False)
    versions = forms.JSONField(required=False)
    heartbeat_interval_s = forms.FloatField(min_value=1, max_value=3600, required=False)

    def clean_versions(self) -> dict[str, str]:
        """``{package: version}``; anything else is rejected (the audit page lists it as such)."""
        value = self.cleaned_data.get("versions") or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
            raise forms.ValidationError('must be an object of package names to version strings, '
                                        'e.g. {"langgraph": "1.2.9"}')
        return value

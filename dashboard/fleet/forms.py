"""Validation of heartbeats sent by outside processes (``POST /api/processes/heartbeat``)."""

from __future__ import annotations

from django import forms

#: Bounds of a heartbeat's fields: Linux's largest pid (pid_max), counts, and the ``versions`` object.
MAX_PID = 4_194_304
MAX_COUNT = 1_000_000
MAX_VERSIONS = 64
MAX_VERSION_TEXT = 100


class ExternalHeartbeatForm(forms.Form):
    """The facts an outside DeerFlow process reports about itself."""

    instance_id = forms.CharField(max_length=64, help_text="stable per process start, e.g. a uuid4 hex")
    name = forms.CharField(max_length=255, required=False)
    host = forms.CharField(max_length=255)
    pid = forms.IntegerField(min_value=0, max_value=MAX_PID)
    mode = forms.ChoiceField(choices=[("full", "full"), ("delta", "delta")])
    snapshot_frequency = forms.IntegerField(min_value=1, max_value=MAX_COUNT)
    config_path = forms.CharField(max_length=1024, required=False)
    config_sha256 = forms.RegexField(regex=r"^[0-9a-f]{64}$", required=False)
    max_supersteps = forms.IntegerField(min_value=1, max_value=MAX_COUNT, required=False)
    versions = forms.JSONField(required=False)
    heartbeat_interval_s = forms.FloatField(min_value=1, max_value=3600, required=False)
    checkpoint_cache = forms.JSONField(required=False)

    def clean_checkpoint_cache(self) -> dict | None:
        """DeerFlow's ``database.checkpoint_cache`` as the process runs it: ``{"type": "memory" | "redis" |
        "disabled", "max_entries"?, "ttl_seconds"?, "key_prefix"?, "redis"?}`` (the audit warns about memory)."""
        value = self.cleaned_data.get("checkpoint_cache")
        if value is None:
            return None
        if not isinstance(value, dict) or value.get("type") not in ("memory", "redis", "disabled"):
            raise forms.ValidationError('must be an object whose "type" is "memory", "redis" or "disabled"')
        out: dict = {"type": value["type"]}
        for key in ("max_entries", "ttl_seconds"):
            n = value.get(key)
            if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 10**12):
                raise forms.ValidationError(f"{key} must be a whole number >= 0")
            out[key] = n
        for key in ("key_prefix", "redis"):
            text = value.get(key) or ""
            if not isinstance(text, str) or len(text) > 255 or "@" in text:
                raise forms.ValidationError(f"{key} must be text of at most 255 characters, without credentials")
            out[key] = text
        return out

    def clean_versions(self) -> dict[str, str]:
        """``{package: version}``; anything else is rejected (the audit page lists it as such)."""
        value = self.cleaned_data.get("versions") or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
            raise forms.ValidationError('must be an object of package names to version strings, '
                                        'e.g. {"langgraph": "1.2.9"}')
        if len(value) > MAX_VERSIONS:
            raise forms.ValidationError(f"has {len(value):,} entries; send at most {MAX_VERSIONS} "
                                        "(the packages that matter: langgraph, langgraph-checkpoint, deerflow, ...)")
        if any(len(k) > MAX_VERSION_TEXT or len(v) > MAX_VERSION_TEXT for k, v in value.items()):
            raise forms.ValidationError(f"package names and versions have at most {MAX_VERSION_TEXT} characters")
        return value


class DismissProcessForm(forms.Form):
    """``POST /audit/dismiss``: the registry row (``instance_id``) of a restarted or gone process."""

    instance_id = forms.CharField(max_length=64)

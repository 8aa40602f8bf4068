"""JobSets checked against the jobset.x-k8s.io/v1alpha2 API: the typed models the kubeflow-trainer-api
package (PyPI) generates from JobSet's OpenAPI types. Strict types reject a wrong value; a field the
API does not know is dropped on parsing, and reported here."""

def dropped_keys(given, parsed, path=""):
    """Keys of `given` that the typed model does not know (it drops them on parsing)."""
    if isinstance(given, dict) and isinstance(parsed, dict):
        return [p for key in given for p in ([f"{path}.{key}"] if key not in parsed
                                               else dropped_keys(given[key], parsed[key], f"{path}.{key}"))]
    if isinstance(given, list) and isinstance(parsed, list):
        return [p for i, (a, b) in enumerate(zip(given, parsed)) for p in dropped_keys(a, b, f"{path}[{i}]")]
    return []


def check_jobset(obj):
    """A JobSet against the jobset.x-k8s.io/v1alpha2 types (strict types; unknown fields are reported)."""
    # Imported here: the package's models take a second of CPU to import, which every xdist worker's collection
    # would pay.
    from kubeflow_trainer_api.models.jobset_v1alpha2_job_set import JobsetV1alpha2JobSet

    parsed = JobsetV1alpha2JobSet.from_dict(obj).to_dict()
    assert dropped_keys(obj, parsed) == [], f"JobSet {obj['metadata']['name']} has fields the API does not know"

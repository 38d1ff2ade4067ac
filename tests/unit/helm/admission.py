"""The chart's ValidatingAdmissionPolicy evaluated as the API server evaluates it, with a CEL
implementation (``cel-python``; the API server's is cel-go, same language).

No kube-apiserver runs here, so :func:`refusals` plays its admission step for one request: the
policy applies when a resource rule names the resource and every ``matchCondition`` holds; its
``variables`` are evaluated in order (one that fails to evaluate, as ``object.spec`` of a
Secret does, is left out: the API server evaluates a variable only where it is referenced, and
the policy references those only under a guard); each validation that is not ``true`` (false,
or an evaluation error, which ``failurePolicy: Fail`` turns into a denial) refuses with its
message.
"""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

_ENV = celpy.Environment()


def admission_policy(objects: list[dict[str, Any]], resource: str) -> dict[str, Any]:
    """The chart's policy over ``resource`` (``jobs`` or ``secrets``)."""
    found = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"
             and any(resource in rule["resources"]
                     for rule in o["spec"]["matchConstraints"]["resourceRules"])]
    assert len(found) == 1, [o["metadata"]["name"] for o in found]
    bindings = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
                and o["spec"]["policyName"] == found[0]["metadata"]["name"]]
    assert len(bindings) == 1 and bindings[0]["spec"]["validationActions"] == ["Deny"]
    return found[0]


def _true(value: Any) -> bool:
    return isinstance(value, celtypes.BoolType) and bool(value)


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    program = _ENV.program(_ENV.compile(expression))
    return program.evaluate(activation)


def refusals(policy: dict[str, Any], obj: dict[str, Any], *, resource: str,
             username: str, operation: str = "CREATE") -> list[str] | None:
    """The messages of the validations ``obj`` fails (``[]``: admitted); ``None`` when the
    policy does not apply to the request at all."""
    spec = policy["spec"]
    if not any(resource in rule["resources"] and operation in rule["operations"]
               for rule in spec["matchConstraints"]["resourceRules"]):
        return None
    request = {"userInfo": {"username": username}, "operation": operation,
               "resource": {"resource": resource}}
    activation: dict[str, Any] = {"object": json_to_cel(obj),
                                  "request": json_to_cel(request)}
    for condition in spec.get("matchConditions", []):
        if not _true(_evaluate(condition["expression"], activation)):
            return None
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        activation["variables"] = celtypes.MapType(variables)
        try:
            value = _evaluate(variable["expression"], activation)
        except CELEvalError:
            continue
        if not isinstance(value, CELEvalError):
            variables[celtypes.StringType(variable["name"])] = value
    activation["variables"] = celtypes.MapType(variables)
    failed = []
    for validation in spec["validations"]:
        try:
            result = _evaluate(validation["expression"], activation)
        except CELEvalError as exc:
            result = exc
        if not _true(result):
            failed.append(f"{validation['message']} ({result!r})"[:400])
    return failed

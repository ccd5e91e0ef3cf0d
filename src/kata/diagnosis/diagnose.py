"""JAX-aware diagnosis: what an exception from learner code means to a PyTorch user.

Works on the exception's class names (its whole MRO, so subclasses match) and message,
plus the learner's line that raised, so it runs without importing JAX and across JAX
versions whose messages differ (match short, stable substrings only).

RULES is every rule, in the order they are tried: the first that recognises the failure
answers. A rule is a row of `error_rules.toml` where the error's type, words and line are
evidence enough (KNOWN), else a function of `diagnose_spelling` (PyTorch's names and
argument orders), `diagnose_values` (keys, traced values, pytrees, loops, shapes) or
`diagnose_calls` (calls into JAX, Optax and Equinox, read from their signatures).

Words of kata's own, in the rules and their texts:
    learner     whoever takes the course; the learner's line is the line of their code the
                traceback ends on (`Failure.source_line`), their lines every line of theirs
                in it (`Failure.learner_lines`)
    check       a test of the course's `checks/` that grades an exercise; the grader runs
                them sandboxed (a time limit, no network, writes only in its folder)
    habit       a PyTorch way of writing something, brought to JAX, where it fails
    evidence    what a rule reads to recognise a failure: the exception's classes, its
                message, the learner's lines
    row         an entry of a table: `error_rules.toml`'s (a rule given as data) or
                `torch_to_jax.toml`'s (a torch name and its JAX spelling)
    look-alike  an error with a rule's words but not its cause, on which the rule stays
                silent (tests/test_diagnosis_look_alikes.py)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kata.diagnosis import diagnose_calls, diagnose_spelling, diagnose_values, error_rules
from kata.diagnosis.diagnose_types import Diagnosis, Failure

__all__ = ["Diagnosis", "Failure", "RULES", "diagnose", "rule_name"]

Rule = Callable[[Failure], Diagnosis | None]

KNOWN = error_rules.by_name()  # the rules of error_rules.toml, by name

RULES: tuple[Rule, ...] = (
    KNOWN["timeout"],
    KNOWN["process_refused"],
    KNOWN["sandboxed_write"],
    KNOWN["program_exit"],
    diagnose_values.key_reuse,
    KNOWN["in_place_write"],
    KNOWN["custom_rule_shape"],
    KNOWN["optimizer_object"],
    diagnose_calls.arguments_out_of_order,
    diagnose_spelling.random_in_torch_order,
    diagnose_spelling.torch_positional_meaning,
    diagnose_spelling.key_method,
    diagnose_calls.keyword_a_library_lacks,
    diagnose_spelling.torch_spelling,
    diagnose_spelling.module_method,
    KNOWN["module_changed_in_place"],
    diagnose_spelling.module_without_call,
    KNOWN["dropout_without_key"],
    KNOWN["grad_of_a_non_float"],
    KNOWN["sizes_as_separate_numbers"],
    diagnose_spelling.pytorch_habit,
    KNOWN["dtype_mismatch"],
    KNOWN["update_without_method"],
    KNOWN["transform_of_a_value"],
    KNOWN["pytree_class_methods"],
    KNOWN["block_on_container"],
    diagnose_values.container_as_array,
    diagnose_values.optimizer_state_field,
    diagnose_values.leaked_tracer,
    KNOWN["numpy_conversion"],
    KNOWN["python_loop_count"],
    KNOWN["integer_from_tracer"],
    KNOWN["python_while"],
    diagnose_values.python_operator_on_tracer,
    diagnose_values.bool_inside_a_call,
    KNOWN["python_control_flow"],
    KNOWN["squeeze_of_a_longer_axis"],
    diagnose_values.matrix_product_sizes,
    KNOWN["layer_without_key"],
    KNOWN["layer_on_a_batch"],
    KNOWN["grad_of_a_non_scalar"],
    KNOWN["cross_entropy_labels"],
    diagnose_spelling.device_by_name,
    KNOWN["einsum_operands_in_a_list"],
    KNOWN["torch_pair_unpacked"],
    KNOWN["data_dependent_size"],
    KNOWN["concrete_scalar"],
    KNOWN["boolean_mask"],
    KNOWN["static_not_hashable"],
    KNOWN["static_name_unknown"],
    KNOWN["static_position_counted_from_one"],
    diagnose_values.not_a_pytree,
    KNOWN["vmap_axes"],
    KNOWN["loop_carry_type"],
    diagnose_values.loop_body_signature,
    KNOWN["fori_body_order"],
    diagnose_values.missing_key,
    diagnose_values.format_field_without_value,
    diagnose_calls.custom_rule_arguments,
    KNOWN["jvp_rule_given_tuples"],
    KNOWN["branches_given_values"],
    diagnose_calls.value_where_argnums_goes,
    KNOWN["gradient_indexed_as_a_tuple"],
    diagnose_calls.arithmetic_on_containers,
    diagnose_calls.jit_member_on_a_function,
    KNOWN["replace_through_init"],
    KNOWN["size_as_a_shape"],
    KNOWN["model_leaves_in_an_update"],
    KNOWN["multi_transform_given_a_mask"],
    KNOWN["update_without_params"],
    diagnose_calls.optimizer_function_arguments,
    diagnose_calls.name_in_another_module,
    diagnose_values.dict_iterated_for_its_arrays,
    diagnose_calls.library_call,
)


def rule_name(rule: Rule) -> str:
    """The name a rule gives its diagnosis (`Diagnosis.rule`): a row's, or a function's."""
    return rule.name if isinstance(rule, error_rules.KnownError) else rule.__name__


def diagnose(failure: Failure) -> Diagnosis | None:
    """The first rule that recognises the failure, or None for an ordinary error."""
    for rule in RULES:
        found = rule(failure)
        if found is not None:
            return dataclasses.replace(found, rule=rule_name(rule))
    return None

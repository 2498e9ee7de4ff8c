"""The plugin module named by the entry point: hook implementations only, nothing imported eagerly."""

from ragen_core import hookimpl


@hookimpl
def ragen_register_envs(registry):
    registry.register("guess_number", "ragen_example_plugin.guess:GuessNumberEnv",
                      description="find a hidden number from higher/lower hints",
                      guide={"rules": "A hidden whole number between 1 and `high`; after each guess the env says "
                                      "higher or lower.",
                             "actions": "a whole number from 1 to `high`; anything else is invalid and changes "
                                        "nothing.",
                             "rewards": "+1 for the hidden number, 0 for another valid guess, -0.1 for an invalid "
                                        "one.",
                             "success": "the hidden number was guessed within `max_guesses`."})
    registry.register_variant("guess_number_hard", env="guess_number", params={"high": 100, "max_guesses": 8},
                              description="1..100 in 8 guesses")


@hookimpl
def ragen_register_filters(registry):
    registry.register("any_success", "ragen_example_plugin.filters:AnySuccessFilter",
                      description="keep groups with at least one success")

"""The rank correlation page's small Table 1: its sentences (the task is marginal_core.tasks.rank)."""

from __future__ import annotations

# Sentences of about 50, 100 and 300 characters (the paper uses 15 per length and 1000 unique
# tokenizations each; the app's defaults take the first few and k = 50).
RANK_SENTENCES: dict[int, list[str]] = {
    50: [
        "The quick brown fox jumps over the lazy dog again.",
        "She sells sea shells by the sea shore every day.",
        "A journey of a thousand miles begins with a step.",
        "Rainbows appear when sunlight passes through rain.",
        "The library opens at nine and closes at six today.",
    ],
    100: [
        "The committee postponed its decision until the next meeting, citing the need for further analysis.",
        "Photosynthesis converts light energy into chemical energy that plants store in the form of sugars.",
        "After the storm passed, the villagers gathered in the square to assess the damage to their homes.",
        "Many programming languages support anonymous functions, which are useful for short callbacks.",
        "The museum's new exhibition traces the history of navigation from ancient stars to satellites.",
    ],
    300: [
        "In the early twentieth century the small coastal town lived on fishing, but the railway "
        "changed everything: merchants from the capital opened shops along the harbour, tourists "
        "filled the guesthouses each summer, and the old fishermen watched with mixed feelings as "
        "their quiet world slowly disappeared.",
        "Researchers studying sleep have found that the brain stays remarkably active at night, "
        "replaying the day, strengthening some memories while discarding others, and clearing away "
        "waste that builds up during waking hours, which may explain why poor sleep affects both "
        "mood and memory.",
        "The recipe calls for two cups of flour, a pinch of salt, three eggs, and enough milk to make a "
        "smooth batter; let it rest for half an hour, then heat a heavy pan until a drop of water dances "
        "on its surface, pour in a thin layer, and cook each pancake until the edges turn golden brown.",
    ],
}

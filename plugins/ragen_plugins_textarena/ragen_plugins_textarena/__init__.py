"""ragen-plugins-textarena: TextArena's games as multi-turn ragen envs (env ``textarena``, namespace ``ta``).

See plugin.py for the registration, env.py for the env, opponents.py for player 1 of two-player games, games.py
for the shipped list of games. Importing this package imports nothing of TextArena.
"""

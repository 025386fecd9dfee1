"""The catalog tree's types: the one generic type service (crud.py), each type's hooks in its own
module (containers, tables, views, volumes, functions, models, metastores, storage), and the rules
they share (assets, dependencies, path_access, column_governance). Imports nothing of features/ or protocols/."""

from vlmeval_ext.cli import main

main()
